// agenttrail console: copy buttons and the Runs page's live updates. No framework, no network
// beyond this sidecar.
"use strict";

document.addEventListener("click", (event) => {
  const button = event.target.closest("button.copy");
  if (!button) return;
  const text = button.dataset.copy;
  const done = () => { button.classList.add("done"); button.textContent = "✓ copied"; setTimeout(() => { button.classList.remove("done"); button.textContent = "copy"; }, 1200); };
  if (navigator.clipboard && window.isSecureContext) {
    navigator.clipboard.writeText(text).then(done, () => fallbackCopy(text, done));
  } else {
    fallbackCopy(text, done);
  }
});

function fallbackCopy(text, done) {
  const area = document.createElement("textarea");
  area.value = text;
  document.body.appendChild(area);
  area.select();
  try { document.execCommand("copy"); done(); } finally { area.remove(); }
}

// Live runs: every few seconds ask for rows newer than the newest shown (same filters).
(function liveRuns() {
  const toggle = document.getElementById("live");
  const body = document.getElementById("run-rows");
  const status = document.getElementById("live-status");
  if (!toggle || !body) return;
  let newest = toggle.dataset.newest;
  const base = toggle.dataset.rows;
  async function poll() {
    if (!toggle.checked || document.hidden) return;
    const url = new URL(base, window.location.href);
    if (newest) url.searchParams.set("after", newest);
    try {
      const response = await fetch(url, { headers: { Accept: "text/html" }, credentials: "same-origin" });
      if (!response.ok) { status.textContent = `live updates paused: ${response.status}`; return; }
      const html = (await response.text()).trim();
      const next = response.headers.get("X-Newest");
      if (html && next) {
        body.insertAdjacentHTML("afterbegin", html);
        newest = next;
        const count = body.querySelectorAll("tr.fresh").length;
        status.textContent = `${count} new run${count === 1 ? "" : "s"} since the page loaded`;
        const empty = document.querySelector(".empty");
        if (empty) empty.remove();
      }
    } catch (error) {
      status.textContent = "live updates paused: the sidecar did not answer";
    }
  }
  setInterval(poll, 2000);
})();
