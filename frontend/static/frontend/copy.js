// Copy buttons on any page: <button type="button" class="copy-button" data-copy-target="ID">.
// Copies the target element's text (an input's value) with the Clipboard API; where that is
// refused (http on another host, an old browser) the text is selected for Ctrl-C instead.
// The outcome is said in the page's polite live region (#copy-status), never by an alert.
(function () {
  "use strict";

  function statusRegion() {
    var region = document.getElementById("copy-status");
    if (!region) {
      region = document.createElement("p");
      region.id = "copy-status";
      region.className = "visually-hidden";
      region.setAttribute("role", "status");
      region.setAttribute("aria-live", "polite");
      document.body.appendChild(region);
    }
    return region;
  }

  function say(button, words) {
    var region = statusRegion();
    region.textContent = "";
    // A fresh text node after clearing makes screen readers announce a repeated message.
    window.setTimeout(function () { region.textContent = words; }, 50);
    if (!button.dataset.label) {
      button.dataset.label = button.textContent;
    }
    button.textContent = words.indexOf("Copied") === 0 ? "Copied" : "Select and copy";
    window.setTimeout(function () { button.textContent = button.dataset.label; }, 2500);
  }

  function textOf(target) {
    if ("value" in target && typeof target.value === "string" && target.tagName !== "BUTTON") {
      return target.value;
    }
    return target.textContent.trim();
  }

  function select(target) {
    if (typeof target.select === "function") {
      target.select();
      return;
    }
    var range = document.createRange();
    range.selectNodeContents(target);
    var selection = window.getSelection();
    selection.removeAllRanges();
    selection.addRange(range);
  }

  document.addEventListener("click", function (event) {
    var button = event.target.closest ? event.target.closest("button.copy-button[data-copy-target]") : null;
    if (!button) {
      return;
    }
    var target = document.getElementById(button.dataset.copyTarget);
    if (!target) {
      return;
    }
    var text = textOf(target);
    var fallback = function () {
      select(target);
      say(button, "Could not copy by itself: the text is selected, press Ctrl+C (or ⌘C) to copy it.");
    };
    if (navigator.clipboard && window.isSecureContext) {
      navigator.clipboard.writeText(text).then(function () {
        say(button, "Copied to the clipboard.");
      }, fallback);
    } else {
      fallback();
    }
  });
})();
