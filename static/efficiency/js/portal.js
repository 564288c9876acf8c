// Small behaviours shared by every page, kept out of the templates (no inline handlers):
// - <form data-confirm="Question?"> asks before it is submitted (isolate, restart, approve …);
// - <select data-autosubmit> submits its form when changed (the language switch);
// - <a data-print> opens the print dialog (the fault report).
(function () {
  "use strict";
  document.addEventListener("submit", function (event) {
    var form = event.target;
    var question = form.dataset ? form.dataset.confirm : null;
    if (question && !window.confirm(question)) {
      event.preventDefault();
      event.stopImmediatePropagation();
    }
  }, true);
  document.addEventListener("click", function (event) {
    var link = event.target.closest ? event.target.closest("[data-print]") : null;
    if (link) {
      event.preventDefault();
      window.print();
    }
  });
  document.addEventListener("change", function (event) {
    var field = event.target;
    if (field.dataset && field.dataset.autosubmit !== undefined && field.form) {
      field.form.submit();
    }
  });
})();
