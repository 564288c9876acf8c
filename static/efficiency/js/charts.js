// Draws every server-built Plotly figure on the page: <div data-plotly="ID-of-json-script">.
(function () {
  "use strict";
  function drawCharts(root) {
    root.querySelectorAll("[data-plotly]").forEach(function (element) {
      var source = document.getElementById(element.dataset.plotly);
      if (!source || element.dataset.drawn) { return; }
      var figure = JSON.parse(source.textContent);
      Plotly.newPlot(element, figure.data, figure.layout, {
        responsive: true,
        displaylogo: false,
        modeBarButtonsToRemove: ["lasso2d", "select2d"],
      });
      element.dataset.drawn = "1";
    });
  }
  document.addEventListener("DOMContentLoaded", function () { drawCharts(document); });
  // Charts that arrive in an htmx partial are drawn too.
  document.addEventListener("htmx:afterSwap", function (event) { drawCharts(event.target); });
})();
