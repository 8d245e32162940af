// The run page follows a run in flight: it asks the run's status every two seconds and,
// when anything it shows has changed, swaps in the page's new content (no reload, the
// scroll position kept). It stops once the run is finished.
(function () {
  "use strict";
  var INTERVAL = 2000;

  function follow(element) {
    var url = element.getAttribute("data-live");
    var version = element.getAttribute("data-version");
    var timer = null;

    function refresh() {
      return fetch(window.location.href, { credentials: "same-origin" })
        .then(function (response) { return response.text(); })
        .then(function (html) {
          var next = new DOMParser().parseFromString(html, "text/html").querySelector("main");
          var main = document.querySelector("main");
          if (next && main) {
            main.innerHTML = next.innerHTML;
          }
          var live = document.querySelector("[data-live]");
          if (live) {
            follow(live);
          }
        });
    }

    function poll() {
      fetch(url, { credentials: "same-origin", headers: { Accept: "application/json" } })
        .then(function (response) {
          if (!response.ok) { throw new Error("status " + response.status); }
          return response.json();
        })
        .then(function (state) {
          if (state.version !== version) {
            refresh();  // follows the new content (or stops, when the run is finished)
          } else {
            timer = window.setTimeout(poll, INTERVAL);
          }
        })
        .catch(function () { timer = window.setTimeout(poll, INTERVAL * 3); });
    }

    timer = window.setTimeout(poll, INTERVAL);
    return timer;
  }

  document.addEventListener("DOMContentLoaded", function () {
    var live = document.querySelector("[data-live]");
    if (live) {
      follow(live);
    }
    // A form that only hands something on (the App manifest to GitHub) goes by itself;
    // its button is there for a browser without scripts.
    var onward = document.querySelector("form[data-autosubmit]");
    if (onward) {
      onward.submit();
    }
  });
})();
