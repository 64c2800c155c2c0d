// The h3-engine page: submits to POST /v1/videos (multipart form, as the API takes uploads), follows
// GET /v1/videos/{id}/events, plays the MP4, lists GET /v1/videos. With --api-key every request carries
// "Authorization: Bearer KEY" (the key is asked once and kept in sessionStorage). EventSource and <video src>
// cannot send that header, so the events are read with fetch() and a stream reader, and the video is fetched
// with the header and played from a blob: URL. GET /v1/models names the loaded model: the page shows it and
// fills its fields with the model's defaults (a field left as filled, or emptied, gets them); a finished
// video offers a download link (the same blob).
"use strict";

const KEY_STORAGE = "h3.apiKey";
const FIELDS = ["prompt", "size", "seconds", "seed", "num_inference_steps", "quality", "first_frame",
                "last_frame", "reference"];
const $ = (id) => document.getElementById(id);
let current = null;        // {id, abort: AbortController, final: whether a final status was shown}
let historyAfter = null;   // the list cursor for "Older videos"
let playerUrl = null;      // the blob: URL the player holds

function apiKey() { return sessionStorage.getItem(KEY_STORAGE) || ""; }

function headers(extra) {
  const h = Object.assign({}, extra || {});
  if (apiKey()) h["Authorization"] = "Bearer " + apiKey();
  return h;
}

class ApiError extends Error {
  constructor(status, body) {
    const e = (body && body.error) || {};
    super(e.message || ("HTTP " + status));
    this.status = status;
    this.param = e.param || null;
    this.code = e.code || null;
  }
}

async function api(path, options) {
  const o = Object.assign({}, options || {});
  o.headers = headers(o.headers);
  const res = await fetch(path, o);
  if (res.status === 401) askForKey(apiKey() ? "The key was refused; enter it again." : "");
  if (!res.ok) {
    let body = null;
    try { body = await res.json(); } catch (_) { /* not JSON */ }
    throw new ApiError(res.status, body);
  }
  return res;
}

// ---- API key
function askForKey(message) {
  $("key-form").hidden = false;
  $("key-error").textContent = message || "";
  $("api-key").focus();
}

$("key-form").addEventListener("submit", (ev) => {
  ev.preventDefault();
  const key = $("api-key").value.trim();
  if (!key) { $("key-error").textContent = "Enter the key the server was started with."; return; }
  sessionStorage.setItem(KEY_STORAGE, key);
  $("api-key").value = "";
  $("key-form").hidden = true;
  loadModel();
  loadHistory(true);
});

// ---- the loaded model and its defaults
async function loadModel() {
  try {
    const res = await api("/v1/models");
    const m = (await res.json()).data[0];
    const d = m.defaults || {};
    $("model-info").textContent = "Model: " + m.id + " (" + m.device + ", " + m.dtype + ")" +
      (m.defaults ? " — defaults " + d.size + ", " + d.frames + " frames (" + d.seconds.toFixed(2) + " s), " +
        d.num_inference_steps + " steps" : "");
    $("model-info").dataset.model = m.id;
    if (m.defaults) {
      inputFor("size").value = d.size;
      inputFor("size").placeholder = d.size;
      // the default duration as the frames give it (snapped back to the same frames by the server)
      inputFor("seconds").value = String(Math.round(d.seconds * 1000) / 1000);
      inputFor("num_inference_steps").value = String(d.num_inference_steps);
    }
    if (m.limits && m.limits.num_inference_steps)
      inputFor("num_inference_steps").max = String(m.limits.num_inference_steps[1]);
  } catch (err) {
    if (err.status !== 401) $("model-info").textContent = "Model: unknown (" + err.message + ")";
  }
}

// ---- field errors
function clearErrors() {
  for (const f of FIELDS) {
    const el = $("err-" + f);
    if (el) el.textContent = "";
  }
  for (const el of document.querySelectorAll("[aria-invalid]")) el.removeAttribute("aria-invalid");
  $("form-error").textContent = "";
}

function inputFor(field) {
  return document.querySelector('#job-form [name="' + field + '"]');
}

function showError(err) {
  const slot = err.param && $("err-" + err.param);
  if (slot) {
    slot.textContent = err.message;
    const input = inputFor(err.param);
    if (input) { input.setAttribute("aria-invalid", "true"); input.focus(); }
  } else {
    $("form-error").textContent = err.message;
  }
}

// ---- submit
function formData() {
  const fd = new FormData();
  const text = (name) => inputFor(name).value.trim();
  fd.append("prompt", inputFor("prompt").value);
  for (const name of ["size", "seconds", "seed", "num_inference_steps", "quality"])
    if (text(name) !== "") fd.append(name, text(name));
  for (const name of ["first_frame", "last_frame"]) {
    const f = inputFor(name).files[0];
    if (f) fd.append(name, f, f.name);
  }
  for (const f of inputFor("reference").files) fd.append("reference", f, f.name);
  return fd;
}

$("job-form").addEventListener("submit", async (ev) => {
  ev.preventDefault();
  clearErrors();
  if (!inputFor("prompt").value.trim()) {
    showError({param: "prompt", message: "Enter a prompt."});
    return;
  }
  $("submit").disabled = true;
  try {
    const res = await api("/v1/videos", {method: "POST", body: formData()});
    const video = await res.json();
    follow(video);
    loadHistory(true);
  } catch (err) {
    showError(err);
  } finally {
    $("submit").disabled = false;
  }
});

// ---- the current job: progress from the event stream
const FINAL_STATUSES = ["completed", "failed", "cancelled"];

function showJob(video) {
  // Snapshots come from two connections (the event stream, the cancel answer), so an older one can arrive
  // last: once the job showed a final status, a non-final snapshot of it is stale and ignored.
  const final = FINAL_STATUSES.includes(video.status);
  if (current && current.id === video.id) {
    if (current.final && !final) return;
    if (final) current.final = true;
  }
  $("job").hidden = false;
  $("job-id").textContent = video.id;
  $("job-status").textContent = video.status;
  const p = Math.round(video.progress || 0);
  $("job-progress").value = p;
  $("job-percent").textContent = p + " %";
  $("cancel").disabled = final;
  $("job-error").textContent = video.error ? (video.error.code + ": " + video.error.message) : "";
  const warnings = $("job-warnings");
  warnings.textContent = "";
  const notes = (video.warnings || []).slice();
  if (video.estimated_seconds)
    notes.push("estimated denoise time on this server: " + Math.round(video.estimated_seconds) + " s");
  for (const w of notes) {
    const li = document.createElement("li");
    li.textContent = w;
    warnings.appendChild(li);
  }
}

function follow(video) {
  if (current) current.abort.abort();
  current = {id: video.id, abort: new AbortController()};
  $("download").hidden = true;
  showJob(video);
  $("job-stage").textContent = "";
  readEvents(current).catch((err) => {
    if (err.name !== "AbortError") $("job-error").textContent = "event stream: " + err.message;
  });
}

// Server-sent events over fetch(): "event:" / "data:" lines, a blank line ends an event.
async function readEvents(job) {
  const res = await api("/v1/videos/" + job.id + "/events",
                        {signal: job.abort.signal, headers: {Accept: "text/event-stream"}});
  const reader = res.body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  for (;;) {
    const {value, done} = await reader.read();
    if (done) break;
    buffer += decoder.decode(value, {stream: true});
    let cut;
    while ((cut = buffer.indexOf("\n\n")) >= 0) {
      const block = buffer.slice(0, cut);
      buffer = buffer.slice(cut + 2);
      let event = "message", data = "";
      for (const line of block.split("\n")) {
        if (line.startsWith("event:")) event = line.slice(6).trim();
        else if (line.startsWith("data:")) data += line.slice(5).trim();
      }
      if (data) onEvent(job, event, JSON.parse(data));
    }
  }
}

function onEvent(job, event, data) {
  if (!current || current.id !== job.id) return;
  if (event === "progress") {
    showJob(data);
    $("job-stage").textContent = data.stage ? ("(" + data.stage +
      (data.total_steps ? " " + data.step + "/" + data.total_steps : "") + ")") : "";
    return;
  }
  showJob(data); // done | failed | cancelled carry the video object
  $("job-stage").textContent = "";
  if (event === "done") play(data.id, data.url);
  loadHistory(true);
}

$("cancel").addEventListener("click", async () => {
  if (!current) return;
  try {
    const res = await api("/v1/videos/" + current.id + "/cancel", {method: "POST"});
    showJob(await res.json());
  } catch (err) {
    $("job-error").textContent = err.message;
  }
});

// ---- player: the MP4 fetched with the key, played from a blob: URL
async function play(id, url) {
  try {
    const res = await api(url || ("/v1/videos/" + id + "/content"));
    const blob = await res.blob();
    if (playerUrl) URL.revokeObjectURL(playerUrl);
    playerUrl = URL.createObjectURL(blob);
    const v = $("player");
    v.src = playerUrl;
    v.dataset.videoId = id;
    $("player-caption").textContent = id;
    const a = $("download"); // the same bytes as a file
    a.href = playerUrl;
    a.download = id + (blob.type === "audio/wav" ? ".wav" : blob.type === "video/mp4" ? ".mp4" : "");
    a.dataset.videoId = id;
    a.hidden = false;
    v.play().catch(() => { /* autoplay may be refused; the controls still work */ });
  } catch (err) {
    $("player-caption").textContent = "cannot load " + id + ": " + err.message;
  }
}

// ---- history: GET /v1/videos, newest first, paged by `after`
function cell(row, text) {
  const td = document.createElement("td");
  td.textContent = text;
  row.appendChild(td);
  return td;
}

function button(parent, label, onClick) {
  const b = document.createElement("button");
  b.type = "button";
  b.className = "secondary";
  b.textContent = label;
  b.addEventListener("click", onClick);
  parent.appendChild(b);
}

async function loadHistory(reset) {
  const body = $("history").tBodies[0];
  const params = new URLSearchParams({limit: "10"});
  if (!reset && historyAfter) params.set("after", historyAfter);
  try {
    const res = await api("/v1/videos?" + params);
    const page = await res.json();
    if (reset) body.textContent = "";
    for (const v of page.data) {
      const row = document.createElement("tr");
      row.dataset.videoId = v.id;
      cell(row, v.id);
      cell(row, v.status);
      cell(row, Math.round(v.progress || 0) + " %");
      cell(row, v.size || "");
      cell(row, v.created_at ? new Date(v.created_at * 1000).toLocaleString() : "");
      const actions = cell(row, "");
      if (v.status === "completed") button(actions, "Play", () => play(v.id));
      if (v.status === "queued" || v.status === "in_progress") button(actions, "Follow", () => follow(v));
      body.appendChild(row);
    }
    historyAfter = page.last_id;
    $("more").hidden = !page.has_more;
    $("history-error").textContent = "";
  } catch (err) {
    if (err.status !== 401) $("history-error").textContent = err.message;
  }
}

$("refresh").addEventListener("click", () => loadHistory(true));
$("more").addEventListener("click", () => loadHistory(false));
loadModel();
loadHistory(true);
