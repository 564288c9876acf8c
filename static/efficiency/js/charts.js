// Draws every server-built Plotly figure on the page: <div data-plotly="ID-of-json-script">.
// - Titles: plotly.js does not wrap them, so a title wider than its chart is broken onto more
//   lines here, where the width is known, and again when the window is resized.
// - Language: on a Chinese page (<html lang="zh-hans">) Plotly speaks zh-CN (the locale file
//   static/vendor/plotly-locales/plotly-locale-zh-cn.js, loaded by base_charts.html), with dates
//   written the Chinese way ("11月26日", "2026年11月26日 14:00").
(function () {
  "use strict";
  var CJK = "\u2e80-\u9fff\uf900-\ufaff\uff00-\uffef";
  // One CJK character, or a run of anything else up to a space or a CJK character, or spaces.
  var TOKENS = new RegExp("[" + CJK + "]|[^\\s" + CJK + "]+|\\s+", "g");
  var ZH_CN = {
    format: {
      // Ticks and hovers of date axes; plotly's own zh-CN locale leaves these English-shaped.
      shortMonths: ["1月", "2月", "3月", "4月", "5月", "6月", "7月", "8月", "9月", "10月", "11月", "12月"],
      year: "%Y年",
      month: "%Y年%-m月",
      dayMonth: "%-m月%-d日",
      dayMonthYear: "%Y年%-m月%-d日",
    },
  };
  var ZH_DATE_HOVER = "%Y年%-m月%-d日 %H:%M";
  var ISO_DATE = /^\d{4}-\d{2}-\d{2}/;
  var MIN_PLOT_PX = 180;
  var measure = document.createElement("canvas").getContext("2d");

  function plotlyLocale() {
    var lang = (document.documentElement.lang || "").toLowerCase();
    return lang.indexOf("zh") === 0 ? "zh-CN" : null;
  }

  function wrapTitle(text, widthPx, font) {
    measure.font = font;
    var lines = [];
    var line = "";
    (text.match(TOKENS) || []).forEach(function (token) {
      var candidate = line + token;
      if (line.trim() && measure.measureText(candidate.trim()).width > widthPx) {
        lines.push(line.trim());
        line = token.trim() ? token : "";
      } else {
        line = candidate;
      }
    });
    if (line.trim()) { lines.push(line.trim()); }
    return lines.join("<br>");
  }

  function fittedTitle(element, layout) {
    var title = layout.title || {};
    var text = element.dataset.titleText;
    var width = element.clientWidth;
    if (!text || !width) { return null; }
    var size = (title.font && title.font.size) || 17;
    var family = (title.font && title.font.family) || (layout.font && layout.font.family) || "sans-serif";
    var padding = ((title.pad && title.pad.l) || 0) + 12;
    return wrapTitle(text, width - padding, size + "px " + family);
  }

  // Hovers on date axes, Chinese style; set before drawing, on every axis that carries dates.
  function chineseDateHovers(figure) {
    var layout = figure.layout;
    (figure.data || []).forEach(function (trace) {
      ["x", "y"].forEach(function (letter) {
        var values = trace[letter];
        var first = values && values.length ? values.find(function (v) { return v !== null; }) : null;
        if (typeof first !== "string" || !ISO_DATE.test(first)) { return; }
        var key = letter + "axis" + (trace[letter + "axis"] || letter).slice(1);
        layout[key] = layout[key] || {};
        if (!layout[key].hoverformat) { layout[key].hoverformat = ZH_DATE_HOVER; }
      });
    });
  }

  function drawCharts(root) {
    var locale = plotlyLocale();
    root.querySelectorAll("[data-plotly]").forEach(function (element) {
      var source = document.getElementById(element.dataset.plotly);
      if (!source || element.dataset.drawn) { return; }
      var figure = JSON.parse(source.textContent);
      var layout = figure.layout = figure.layout || {};
      if (layout.title && layout.title.text) {
        element.dataset.titleText = layout.title.text;
        layout.title.text = fittedTitle(element, layout) || layout.title.text;
      }
      var config = { responsive: true, displaylogo: false, modeBarButtonsToRemove: ["lasso2d", "select2d"] };
      if (locale === "zh-CN") {
        config.locale = locale;
        config.locales = { "zh-CN": ZH_CN };
        chineseDateHovers(figure);
      }
      element.dataset.drawn = "1";
      try {
        Plotly.newPlot(element, figure.data, layout, config).then(function () { keepPlotReadable(element); });
      } catch (error) {
        // One chart that cannot be drawn must not keep the others from being drawn.
        window.console.error("chart " + element.id + ": " + error);
      }
    });
  }

  // On a narrow screen the title, legend and tick labels can take most of a chart's height:
  // make the chart taller until the plot itself keeps MIN_PLOT_PX.
  // (A taller chart lets its legend grow too, so this may take a few steps.)
  function keepPlotReadable(element, attempt) {
    var size = element._fullLayout && element._fullLayout._size;
    attempt = attempt || 0;
    if (size && size.h < MIN_PLOT_PX - 1 && attempt < 4) {
      Plotly.relayout(element, { height: element._fullLayout.height + MIN_PLOT_PX - size.h }).then(function () {
        // Setting the height pins the width at its current value (plotly.js does so): let the
        // width follow the window again, or a chart drawn wide overflows a narrowed window.
        delete element.layout.width;
        element.layout.autosize = true;
        keepPlotReadable(element, attempt + 1);
      });
    }
  }

  function refitTitles() {
    document.querySelectorAll("[data-plotly][data-drawn]").forEach(function (element) {
      if (!element._fullLayout || !element.dataset.titleText) { return; }
      var text = fittedTitle(element, element.layout);
      if (text && text !== element.layout.title.text) {
        Plotly.relayout(element, { "title.text": text }).then(function () { keepPlotReadable(element); });
      } else {
        keepPlotReadable(element);
      }
    });
  }

  var resizeTimer = null;
  window.addEventListener("resize", function () {
    window.clearTimeout(resizeTimer);
    resizeTimer = window.setTimeout(refitTitles, 150);
  });
  document.addEventListener("DOMContentLoaded", function () { drawCharts(document); });
  // Charts that arrive in an htmx partial are drawn too.
  document.addEventListener("htmx:afterSwap", function (event) { drawCharts(event.target); });
})();
