// The glovebox console's one script (served from 'self': the CSP runs no inline script).
// Live pages: a section with data-live-mark and data-live-source is kept current. Every
// few seconds the script asks the source for its mark (a few bytes); when the mark has
// changed, it fetches the page again and swaps in the new section, keeping what the
// viewer typed in its fields, which confirmations were open and where the focus was. Without JavaScript the page's
// <noscript> refresh does the same, less gently.
(function () {
  "use strict";
  var EVERY_MS = 2000;

  function live() {
    return document.querySelector("[data-live-mark]");
  }

  function swap(html) {
    var fresh = new DOMParser().parseFromString(html, "text/html").querySelector("[data-live-mark]");
    var old = live();
    if (!fresh || !old) return;
    var focused = document.activeElement && old.contains(document.activeElement) ? document.activeElement.id : "";
    old.querySelectorAll("input[id]").forEach(function (input) {
      var twin = fresh.querySelector("#" + CSS.escape(input.id));
      if (twin && input.type !== "hidden") twin.value = input.value;
    });
    old.querySelectorAll("details[id][open]").forEach(function (details) {
      var twin = fresh.querySelector("#" + CSS.escape(details.id));
      if (twin) twin.open = true;
    });
    var imported = document.importNode(fresh, true);
    old.replaceWith(imported);
    if (focused) {
      var again = document.getElementById(focused);
      if (again) again.focus();
    }
  }

  function poll() {
    var section = live();
    if (!section) return;
    fetch(section.getAttribute("data-live-source"), { credentials: "same-origin", headers: { Accept: "application/json" } })
      .then(function (answer) { return answer.ok ? answer.json() : null; })
      .then(function (body) {
        if (!body || body.mark === section.getAttribute("data-live-mark")) return null;
        return fetch(window.location.href, { credentials: "same-origin" })
          .then(function (answer) { return answer.ok ? answer.text() : null; })
          .then(function (html) { if (html) swap(html); });
      })
      .catch(function () { /* the server is away: try again later */ })
      .then(function () { window.setTimeout(poll, EVERY_MS); });
  }

  if (live()) window.setTimeout(poll, EVERY_MS);
})();
