// turnlog web: the little JavaScript the viewer needs (no library, no CDN).
"use strict";

(function () {
  // Time travel: the slider moves the position box; letting go loads that position.
  const slider = document.getElementById("slider");
  const box = document.getElementById("position");
  const form = document.getElementById("travel-form");
  if (slider && box && form) {
    slider.addEventListener("input", function () { box.value = "#" + slider.value; });
    slider.addEventListener("change", function () {
      box.value = "#" + slider.value;
      form.submit();
    });
  }

  // Integrity: start a check, then poll its progress until it is done.
  const output = document.getElementById("check-output");
  const progress = document.getElementById("check-progress");
  function poll(id) {
    fetch("/integrity/checks/" + encodeURIComponent(id), { headers: { Accept: "application/json" } })
      .then(function (r) { return r.json(); })
      .then(function (job) {
        progress.hidden = false;
        progress.max = job.total || 1;
        progress.value = job.done;
        output.textContent = job.check + ": " + job.state + " (" + job.done + "/" + job.total + ")";
        if (job.state === "running") {
          setTimeout(function () { poll(id); }, 400);
        } else {
          output.textContent += "\n" + (job.error || JSON.stringify(job.result, null, 2));
        }
      });
  }
  document.querySelectorAll("button.run-check").forEach(function (button) {
    button.addEventListener("click", function () {
      output.textContent = "starting " + button.dataset.check + "…";
      fetch("/integrity/run?check=" + encodeURIComponent(button.dataset.check), { method: "POST", headers: { Accept: "application/json" } })
        .then(function (r) { return r.json(); })
        .then(function (job) { poll(job.id); });
    });
  });
})();
