// The review page. Every piece of document text enters the page through textContent (never innerHTML), so a
// document's HTML and scripts show as text.
"use strict";

const page = { state: null, doc: null, labels: {}, wrong: new Set(), focus: -1, shownAt: 0 };

async function call(path, options) {
  const response = await fetch(path, options);
  if (!response.ok) throw new Error(`${path}: ${response.status} ${await response.text()}`);
  return response.json();
}

function element(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined) node.textContent = text;
  return node;
}

function spanKey(span) { return `${span.behavior}:${span.start}:${span.end}`; }

function showProgress() {
  const s = page.state;
  document.getElementById("progress").textContent = `${s.read} of ${s.total} read`;
  document.getElementById("labels-file").textContent = s.labels_file;
  document.getElementById("done").hidden = s.next !== null;
}

function showBehaviors() {
  for (const button of document.querySelectorAll("#behaviors button")) {
    const behavior = button.dataset.behavior;
    const present = page.labels[behavior] === 1;
    button.setAttribute("aria-pressed", String(present));
    button.querySelector(".verdict").textContent = present ? "present" : "absent";
    const score = page.doc.scores ? ` (score ${page.doc.scores[behavior].toFixed(2)})` : "";
    button.querySelector(".predicted").textContent =
      `classifier: ${page.doc.predicted[behavior] ? "present" : "absent"}${score}`;
  }
}

function showSpans() {
  const list = document.getElementById("spans");
  list.replaceChildren();
  page.doc.spans.forEach((span, index) => {
    // A span classifier's spans carry their own score; the cue engine's do not.
    const score = typeof span.score === "number" ? ` ${span.score.toFixed(2)}` : "";
    const item = element("li", "", `${span.behavior}${score}: “${span.excerpt}”`);
    item.dataset.index = index;
    item.classList.toggle("wrong", page.wrong.has(spanKey(span)));
    item.classList.toggle("focused", index === page.focus);
    item.addEventListener("click", () => { page.focus = index; toggleWrong(); });
    list.appendChild(item);
  });
  for (const node of document.querySelectorAll("#text .hl")) {
    const indices = node.dataset.spans.split(",").map(Number);
    node.classList.toggle("focused", indices.includes(page.focus));
    node.classList.toggle("wrong", indices.every((i) => page.wrong.has(spanKey(page.doc.spans[i]))));
  }
}

function showText() {
  const text = document.getElementById("text");
  text.replaceChildren();
  const behaviors = page.state.behaviors;
  for (const part of page.doc.segments) {
    if (part.spans.length === 0) { text.appendChild(document.createTextNode(part.text)); continue; }
    const kinds = new Set(part.spans.map((i) => page.doc.spans[i].behavior));
    const mark = element("mark", "hl", part.text);
    if (kinds.size > 1) mark.classList.add("multi");
    else mark.classList.add(`b${behaviors.indexOf([...kinds][0])}`);
    mark.dataset.spans = part.spans.join(",");
    mark.title = [...kinds].join(", ");
    text.appendChild(mark);
  }
  if (page.doc.cut) text.appendChild(element("p", "cut", `… cut: ${page.doc.chars} characters in all`));
  text.scrollTop = 0;
}

async function load(position) {
  page.doc = await call(`/api/doc/${position}`);
  const given = page.doc.given;
  page.labels = {};
  for (const behavior of page.state.behaviors) page.labels[behavior] = given ? given.labels[behavior] : 0;
  page.wrong = new Set(given ? given.wrong_spans.map(spanKey) : []);
  page.focus = -1;
  page.shownAt = performance.now();
  document.getElementById("doc-id").textContent = page.doc.id;
  document.getElementById("stratum").textContent = `(${page.doc.position + 1} of ${page.state.total})`;
  showText();
  showBehaviors();
  showSpans();
}

function toggleBehavior(index) {
  const behavior = page.state.behaviors[index];
  if (behavior === undefined) return;
  page.labels[behavior] = page.labels[behavior] === 1 ? 0 : 1;
  showBehaviors();
}

function moveFocus(step) {
  const count = page.doc.spans.length;
  if (count === 0) return;
  page.focus = page.focus < 0 ? (step > 0 ? 0 : count - 1) : (page.focus + step + count) % count;
  showSpans();
  const focused = document.querySelector("#text .hl.focused");
  if (focused) focused.scrollIntoView({ block: "center" });
}

function toggleWrong() {
  if (page.focus < 0) return;
  const key = spanKey(page.doc.spans[page.focus]);
  if (page.wrong.has(key)) page.wrong.delete(key); else page.wrong.add(key);
  showSpans();
}

async function save() {
  const wrong = page.doc.spans.filter((span) => page.wrong.has(spanKey(span)))
    .map(({ behavior, start, end }) => ({ behavior, start, end }));
  page.state = await call("/api/label", {
    method: "POST", headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ position: page.doc.position, labels: page.labels, wrong_spans: wrong,
      seconds: Math.round((performance.now() - page.shownAt) / 100) / 10 }),
  });
  showProgress();
  const after = page.state.next;
  if (after !== null) await load(after);
}

let busy = false;
async function once(action) {
  if (busy) return;
  busy = true;
  try { await action(); } catch (error) { alert(error.message); } finally { busy = false; }
}

document.addEventListener("keydown", (event) => {
  // While a label is saved and the next document loads, keys are held off: they would mark the document leaving.
  if (!page.doc || busy || event.ctrlKey || event.metaKey || event.altKey) return;
  if (/^[1-9]$/.test(event.key)) toggleBehavior(Number(event.key) - 1);
  else if (event.key === "j") moveFocus(1);
  else if (event.key === "k") moveFocus(-1);
  else if (event.key === "x") toggleWrong();
  else if (event.key === "Enter") once(save);
  else if (event.key === "p" && page.doc.position > 0) once(() => load(page.doc.position - 1));
  else return;
  event.preventDefault();
});

document.addEventListener("DOMContentLoaded", () => once(async () => {
  for (const button of document.querySelectorAll("#behaviors button")) {
    button.addEventListener("click", () => toggleBehavior(page.state.behaviors.indexOf(button.dataset.behavior)));
  }
  document.getElementById("save").addEventListener("click", () => once(save));
  page.state = await call("/api/state");
  showProgress();
  await load(page.state.next ?? page.state.total - 1);
}));
