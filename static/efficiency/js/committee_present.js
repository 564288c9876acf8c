// The review pack's presentation mode: one section per screen, for the projector.
// ← / → / PageUp / PageDown / Space move, Home / End jump to the first / last section, Esc leaves
// (back to the pack page). The section shown is kept in the address (#slide-<section>), so a
// reload or a shared link opens the same section. An external file: the CSP allows no inline script.
(function () {
  "use strict";

  function start() {
    var slides = Array.prototype.slice.call(document.querySelectorAll(".presentation .slide"));
    var counter = document.getElementById("slide-counter");
    if (!slides.length) { return; }
    var current = 0;

    function indexOfHash() {
      var id = window.location.hash.replace(/^#/, "");
      for (var i = 0; i < slides.length; i++) {
        if (slides[i].id && slides[i].id === id) { return i; }
      }
      return 0;
    }

    function show(index) {
      current = Math.max(0, Math.min(slides.length - 1, index));
      slides.forEach(function (slide, i) {
        slide.hidden = i !== current;
        slide.setAttribute("aria-hidden", i !== current ? "true" : "false");
      });
      if (counter) { counter.textContent = (current + 1) + " / " + slides.length; }
      if (slides[current].id && window.history && window.history.replaceState) {
        window.history.replaceState(null, "", "#" + slides[current].id);
      }
      var heading = slides[current].querySelector("h2");
      if (heading) { heading.setAttribute("tabindex", "-1"); heading.focus({ preventScroll: true }); }
      window.scrollTo(0, 0);
      // Charts drawn while their slide was hidden take their real width now.
      window.dispatchEvent(new Event("resize"));
    }

    document.addEventListener("keydown", function (event) {
      if (event.altKey || event.ctrlKey || event.metaKey) { return; }
      switch (event.key) {
        case "ArrowRight": case "PageDown": case " ":
          show(current + 1); break;
        case "ArrowLeft": case "PageUp":
          show(current - 1); break;
        case "Home":
          show(0); break;
        case "End":
          show(slides.length - 1); break;
        case "Escape":
          window.location.href = document.body.dataset.exitUrl || "/"; break;
        default:
          return;
      }
      event.preventDefault();
    });
    // A link to another section of the same presentation (the address's #slide-…) moves there.
    window.addEventListener("hashchange", function () { show(indexOfHash()); });
    show(indexOfHash());
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", start);
  } else {
    start();
  }
})();
