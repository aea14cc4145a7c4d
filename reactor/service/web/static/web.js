// reactor's web UI: the few things a server-rendered page cannot do by itself.
// Lists (runs, workers) refresh their rows; a run's page follows the run over
// Server-Sent Events, adds each signal to the timeline and refreshes the parts that
// change, and brings the signals before its tail on demand; a prompt's Reply waits for
// a choice; a JSON field says what is wrong as you type.
"use strict";

const DELTAS = new Set(["text:delta", "thinking:delta"]);
const LIST_EVERY_MS = 2000;

function fetchHtml(url) {
  return fetch(url, { credentials: "same-origin", headers: { Accept: "text/html" } }).then((r) =>
    r.ok && !r.redirected ? r.text() : Promise.reject(new Error(String(r.status))),
  );
}

function keepFresh(body) {
  let shown = body.innerHTML;
  const refresh = () =>
    fetchHtml(body.dataset.refresh).then((html) => {
      if (html !== shown) {
        body.innerHTML = html;
        shown = html;
      }
    }, () => {});
  setInterval(refresh, LIST_EVERY_MS);
}

function timelineItem(root, run, signal) {
  const item = document.createElement("li");
  item.dataset.seq = String(signal.seq);
  item.className = "new";
  const link = document.createElement("a");
  link.href = `${root}/runs/${encodeURIComponent(run)}?at=${signal.seq}#state`;
  link.textContent = `#${signal.seq}`;
  const name = document.createElement("span");
  name.className = "name";
  name.textContent = signal.name;
  const payload = document.createElement("span");
  payload.className = "payload";
  let text = typeof signal.payload === "string" ? signal.payload : JSON.stringify(signal.payload);
  if (text && text.length > 160) text = `${text.slice(0, 159)}…`;
  payload.textContent = text ?? "";
  const fork = document.createElement("a");
  fork.className = "fork";
  fork.href = `${root}/runs/${encodeURIComponent(run)}/fork?at=${signal.seq}`;
  fork.textContent = "Fork from here";
  item.append(link, " ", name, " ", payload, " ", fork);
  return item;
}

function replaceDetails(holder, html) {
  const fresh = document.createElement("div");
  fresh.innerHTML = html;
  const folded = new Map(
    [...holder.querySelectorAll("details[data-id]")].map((d) => [d.dataset.id, d.open]),
  );
  for (const section of fresh.querySelectorAll(":scope > section[id]")) {
    const old = holder.querySelector(`:scope > section#${section.id}`);
    if (!old) continue;
    // Forms someone may be typing in are replaced only when what they are for changed.
    if (old.dataset.key !== undefined && old.dataset.key === section.dataset.key) continue;
    if (old.contains(document.activeElement) && old.dataset.key === undefined) continue;
    old.replaceWith(section);
  }
  for (const details of holder.querySelectorAll("details[data-id]")) {
    if (folded.has(details.dataset.id)) details.open = folded.get(details.dataset.id);
  }
}

function followRun(timeline) {
  const holder = document.getElementById("details");
  const run = timeline.dataset.run;
  let last = Number(timeline.dataset.after || "0");
  let pending = null;
  const refresh = () => {
    pending = null;
    const at = holder.dataset.at;
    const url = holder.dataset.refresh + (at ? `?at=${encodeURIComponent(at)}` : "");
    fetchHtml(url).then((html) => replaceDetails(holder, html), () => {});
  };
  const soon = () => {
    if (pending === null) pending = setTimeout(refresh, 250);
  };
  const source = new EventSource(`${timeline.dataset.events}?after=${last}`);
  source.onmessage = (event) => {
    const signal = JSON.parse(event.data);
    if (signal.seq <= last) return;
    last = signal.seq;
    if (!DELTAS.has(signal.name)) {
      timeline.append(timelineItem(timeline.dataset.root || "", run, signal));
      soon();
    }
    if (signal.name === "harness:end") {
      source.close();
      refresh();
    }
  };
}

// The page shows the tail of a long log; each click brings the page before the first
// signal shown (the server says where the next one begins: data-before, empty at the start).
function showEarlier(button, timeline) {
  const text = document.getElementById("window-text");
  button.addEventListener("click", () => {
    button.disabled = true;
    const url = `${button.dataset.url}?before=${encodeURIComponent(button.dataset.before)}`;
    fetchHtml(url)
      .then((html) => {
        const holder = document.createElement("template");
        holder.innerHTML = html;
        const page = holder.content.querySelector("ol");
        if (!page) throw new Error("no signals in the answer");
        const first = page.firstElementChild;
        timeline.prepend(...page.children);
        if (page.dataset.before) {
          button.dataset.before = page.dataset.before;
          button.disabled = false;
          if (text && first) text.textContent = `Showing the signals from #${first.dataset.seq} on.`;
        } else {
          button.remove();
          if (text) text.textContent = "Showing every signal.";
        }
      })
      .catch(() => {
        button.disabled = false;
        if (text) text.textContent = "The earlier signals could not be loaded; try again.";
      });
  });
}

// A prompt with choices is answered only once one is picked: none is chosen for you.
function enableReply(event) {
  const choice = event.target;
  if (!(choice instanceof HTMLInputElement) || choice.type !== "radio") return;
  const button = choice.form && choice.form.querySelector("button[data-needs-choice]");
  if (button && choice.checked) button.disabled = false;
}

function checkJson(field) {
  const problem = document.getElementById(`${field.id}-problem`);
  let message = "";
  if (field.value.trim() !== "") {
    try {
      JSON.parse(field.value);
    } catch (error) {
      message = `Not JSON yet: ${error.message}`;
    }
  }
  field.setCustomValidity(message);
  if (problem) problem.textContent = message;
}

document.addEventListener("change", enableReply);
document.addEventListener("input", (event) => {
  if (event.target instanceof HTMLTextAreaElement && "json" in event.target.dataset) {
    checkJson(event.target);
  }
});

document.addEventListener("DOMContentLoaded", () => {
  for (const rows of document.querySelectorAll("tbody[data-refresh]")) keepFresh(rows);
  for (const field of document.querySelectorAll("textarea[data-json]")) checkJson(field);
  const timeline = document.getElementById("timeline");
  if (timeline && !timeline.dataset.complete) followRun(timeline);
  const earlier = document.getElementById("show-earlier");
  if (timeline && earlier) showEarlier(earlier, timeline);
});
