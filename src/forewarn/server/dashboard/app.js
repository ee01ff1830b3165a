// The forewarn dashboard: renders the control API's snapshots (server-sent events) and turns
// every operation GET /api/v1/operations lists into a form. Same-origin calls only, each with
// the control API's token as "Authorization: Bearer". The token comes from the link serve
// printed (/?token=...) and is kept in this tab's sessionStorage, which belongs to this origin
// (host and port) alone: never in a cookie, which the browser would send to every server on
// the same host whatever its port.
"use strict";

const API = "/api/v1";
const TOKEN_KEY = "forewarn-control-token";
const TOKEN = takeToken();
let state = null;
let receivedAt = 0;
let selected = null;
let shownRequests = -1;
// The VM a person chose in an event row's "Approve as" list, by EventId: every snapshot
// renders the rows again, and a choice must survive that until it is used.
const approveAs = new Map();

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else if (value !== false && value !== null && value !== undefined) node.setAttribute(key, value);
  }
  for (const child of children) node.append(child);
  return node;
}

function say(text) { document.getElementById("status").textContent = text; }

// The token of the link this tab was opened with, kept for the tab; the link itself is
// replaced in the address bar (and history) by the page's own address.
function takeToken() {
  const url = new URL(window.location.href);
  const given = url.searchParams.get("token");
  if (given) {
    sessionStorage.setItem(TOKEN_KEY, given);
    url.searchParams.delete("token");
    window.history.replaceState(null, "", url.pathname + url.search + url.hash);
  }
  return sessionStorage.getItem(TOKEN_KEY);
}

function locked() {
  sessionStorage.removeItem(TOKEN_KEY);
  document.getElementById("clock").textContent = "locked";
  say("This tab has no valid token for this control API: open the link forewarn serve " +
    "printed when it started (http://.../?token=...).");
}

function authorised(headers = {}) {
  return TOKEN ? { ...headers, Authorization: `Bearer ${TOKEN}` } : headers;
}

async function call(method, path, body) {
  const options = { method, headers: authorised(), credentials: "omit" };
  if (body !== undefined) {
    options.headers["Content-Type"] = "application/json";
    options.body = JSON.stringify(body);
  }
  const response = await fetch(API + path, options);
  if (response.status === 401) locked();
  const text = await response.text();
  const data = text ? JSON.parse(text) : null;
  if (!response.ok) throw new Error((data && (data.detail || data.error)) || response.statusText);
  return data;
}

// -- the clock ------------------------------------------------------------------------------

function platformNow() {
  const now = Date.parse(state.clock.now);
  return state.clock.kind === "ManualClock" ? now : now + (Date.now() - receivedAt);
}

function renderClock() {
  const c = state.clock;
  document.getElementById("clock").textContent =
    `${new Date(platformNow()).toUTCString()} (${c.kind.replace("Clock", "").toLowerCase()} clock, ${c.profile} profile)`;
  document.getElementById("advance").hidden = c.kind !== "ManualClock";
}

// -- the fleet ------------------------------------------------------------------------------

function groupOf(vm) {
  if (vm.availabilitySet) return `availability set ${vm.availabilitySet}`;
  if (vm.scaleSet) return `scale set ${vm.scaleSet}`;
  if (vm.cloudService) return `cloud service ${vm.cloudService}`;
  return "standalone VMs";
}

function vmButton(vm) {
  const classes = ["vm", vm.reachable ? "" : "down", vm.receiving ? "" : "off"].join(" ").trim();
  const label = `${vm.name}: ${vm.reachable ? "up" : "impact under way"}, ` +
    `${vm.receiving ? "Scheduled Events on" : "Scheduled Events off"}, ` +
    `DocumentIncarnation ${vm.incarnation}, host ${vm.host}`;
  return el("button", {
    type: "button", class: classes, title: label, "aria-label": label,
    "aria-pressed": String(vm.name === selected), "data-vm": vm.name,
    onclick: () => select(vm.name),
  }, `${vm.name} #${vm.incarnation}`);
}

function renderFleet() {
  const groups = new Map();
  for (const vm of state.vms) {
    const key = groupOf(vm);
    if (!groups.has(key)) groups.set(key, []);
    groups.get(key).push(vm);
  }
  const fleet = el("div");
  for (const [name, vms] of groups) {
    const fds = [...new Set(vms.map(v => v.faultDomain))].sort((a, b) => a - b);
    const uds = [...new Set(vms.map(v => v.updateDomain))].sort((a, b) => a - b);
    const head = el("tr", {}, el("th", {}, "FD \\ UD"), ...uds.map(u => el("th", { scope: "col" }, String(u))));
    const rows = fds.map(fd => el("tr", {}, el("th", { scope: "row" }, String(fd)),
      ...uds.map(ud => el("td", {}, ...vms.filter(v => v.faultDomain === fd && v.updateDomain === ud).map(vmButton)))));
    fleet.append(el("div", { class: "group" }, el("h3", {}, name),
      el("table", { class: "grid" }, el("thead", {}, head), el("tbody", {}, ...rows))));
  }
  document.getElementById("fleet").replaceChildren(fleet);
  const more = state.vmCount > state.vms.length ? ` (first ${state.vms.length} of ${state.vmCount})` : "";
  document.getElementById("fleet-count").textContent = `${state.vmCount} VM(s)${more}`;
}

// -- events ---------------------------------------------------------------------------------

function countdown(notBefore) {
  if (!notBefore) return "started";
  const seconds = Math.round((Date.parse(notBefore) - platformNow()) / 1000);
  if (seconds <= 0) return "due";
  const m = Math.floor(seconds / 60), s = seconds % 60;
  return `in ${m ? m + " min " : ""}${s} s`;
}

// What a person can do to a Scheduled event from its row: approve it as one of the VMs it
// names that has not approved yet (as that VM's own POST would), or cancel it.
function eventActions(e) {
  if (e.EventStatus !== "Scheduled") return [];
  const actions = [];
  const waiting = e.Resources.filter(vm => !e.approvedByVms.includes(vm));
  if (waiting.length) {
    const chosen = approveAs.get(e.EventId);
    const as = waiting.length > 1
      ? el("select", {
        "aria-label": `VM to approve ${e.EventId} as`,
        onchange: event => approveAs.set(e.EventId, event.target.value),
      }, ...waiting.map(vm => el("option", { value: vm, selected: vm === chosen ? "" : null }, vm)))
      : null;
    const approve = () => {
      approveAs.delete(e.EventId);
      const vm = as ? as.value : waiting[0];
      act(() => call("POST", `/vms/${encodeURIComponent(vm)}/approve`, { eventIds: [e.EventId] }),
        `approved ${e.EventId} as ${vm}`);
    };
    const label = as ? "Approve as" : `Approve as ${waiting[0]}`;
    actions.push(el("button", { type: "button", class: "approve", onclick: approve }, label));
    if (as) actions.push(as);
  }
  actions.push(el("button", { type: "button", class: "cancel", onclick: () => act(() => call("DELETE", `/events/${e.EventId}`), `cancelled ${e.EventId}`) }, "Cancel"));
  return actions;
}

function renderEvents() {
  const rows = state.events.map(e => el("tr", { "data-event": e.EventId },
    el("td", { title: e.EventId }, e.EventId.slice(0, 8)),
    el("td", {}, e.EventType),
    el("td", { class: e.EventStatus }, e.EventStatus),
    el("td", {}, e.Resources.join(", ")),
    el("td", { class: "countdown", "data-not-before": e.NotBefore }, countdown(e.NotBefore)),
    el("td", {}, e.approvedByVms.length ? e.approvedByVms.join(", ") : "-"),
    el("td", {}, e.jobId === null ? "-" : String(e.jobId)),
    el("td", { class: "event-actions" }, ...eventActions(e))));
  document.querySelector("#events tbody").replaceChildren(...rows);
  const listed = new Set(state.events.map(e => e.EventId));
  for (const id of approveAs.keys()) if (!listed.has(id)) approveAs.delete(id);
  document.getElementById("campaigns").textContent = state.campaigns.map(c =>
    `campaign ${c.id}: step ${c.step + 1} of ${c.steps}`).join("; ");
}

function tick() {
  if (!state) return;
  renderClock();
  for (const cell of document.querySelectorAll(".countdown")) cell.textContent = countdown(cell.dataset.notBefore);
}

// -- the timeline of one VM -----------------------------------------------------------------

function select(name) {
  selected = name;
  shownRequests = -1;
  document.getElementById("timeline-vm").textContent = name;
  document.getElementById("approve-all").disabled = false;
  if (state) { renderFleet(); refreshTimeline(); }
}

async function refreshTimeline() {
  if (!selected || !state) return;
  const vm = state.vms.find(v => v.name === selected);
  if (vm && vm.requests === shownRequests) return;
  shownRequests = vm ? vm.requests : -1;
  const data = await call("GET", `/vms/${encodeURIComponent(selected)}/activity`);
  const items = data.entries.slice().reverse().map(entry => {
    const at = new Date(entry.at).toISOString().replace("T", " ").slice(0, 19);
    if (entry.kind === "document") {
      const events = entry.events.map(e => `${e.EventType} ${e.EventStatus} ${e.EventId.slice(0, 8)}`).join(", ") || "no events";
      return el("li", { class: "document" }, `${at} shown DocumentIncarnation ${entry.incarnation}: ${events}`);
    }
    const incarnation = entry.incarnation === null ? "" : ` (incarnation ${entry.incarnation})`;
    const until = new Date(entry.until).toISOString().replace("T", " ").slice(11, 19);
    const times = entry.count > 1 ? ` x${entry.count}, last at ${until}` : "";
    return el("li", { class: "request" }, `${at} ${entry.method} ${entry.path} -> ${entry.status}${incarnation}${times}`);
  });
  document.getElementById("timeline").replaceChildren(...items);
}

// -- operations -----------------------------------------------------------------------------

async function act(run, done) {
  try { await run(); if (done) say(done); } catch (error) { say(`refused: ${error.message}`); }
}

function targetsOf(kind) {
  if (kind === "vm") return state.vms.map(v => v.name);
  if (kind === "host") return [...new Set(state.vms.map(v => v.host))].sort();
  if (kind === "scale-set") return [...new Set(state.vms.map(v => v.scaleSet).filter(Boolean))].sort();
  if (kind === "availability-set") return [...new Set(state.vms.map(v => v.availabilitySet).filter(Boolean))].sort();
  return [];
}

function operationForm(operation) {
  const id = `op-${operation.target}-${operation.name}`;
  const target = el("select", { id: `${id}-target`, name: "target", "data-kind": operation.target, "aria-label": `${operation.target} for ${operation.name}` });
  // An instance-id field's placeholder is an id of the chosen scale set (exampleIds), so the
  // example it shows is one the form accepts.
  const fields = operation.parameters.map(p => p.type === "boolean"
    ? el("label", {}, el("input", { type: "checkbox", name: p.name }), ` ${p.name}`)
    : p.choices.length
      ? el("label", {}, `${p.name} `, el("select", { name: p.name }, ...p.choices.map(c => el("option", { value: c }, c))))
    : p.type === "object"
      ? el("label", {}, `${p.name} `, el("textarea", { name: p.name, rows: 2, cols: 40, required: p.required, spellcheck: "false", "data-example": "policy", placeholder: '{"userInitiatedReboot": {"automaticallyApprove": true}}' }))
      : el("label", {}, `${p.name} `, el("input", { name: p.name, "data-example": "instance-ids", size: 8, required: p.required })));
  target.addEventListener("change", () => fillExamples(form));
  const form = el("form", { id, "data-operation": operation.name, "data-target": operation.target },
    el("strong", {}, `${operation.target} ${operation.name}`), target, ...fields,
    el("button", { type: "submit" }, "Run"),
    el("span", { class: "summary" }, operation.summary));
  form.addEventListener("submit", event => {
    event.preventDefault();
    const body = {};
    for (const p of operation.parameters) {
      const input = form.elements[p.name];
      if (p.type === "object") {
        try { body[p.name] = JSON.parse(input.value || "{}"); } catch (error) { say(`${p.name}: not JSON (${error.message})`); return; }
      } else {
        body[p.name] = p.type === "boolean" ? input.checked
          : p.choices.length ? input.value : input.value.split(/[\s,]+/).filter(Boolean);
      }
    }
    const path = operation.path.replace("/api/v1", "").replace("{name}", encodeURIComponent(target.value));
    act(async () => {
      const result = await call("POST", path, operation.parameters.length ? body : undefined);
      const ids = (result.events || []).map(e => `${e.EventType} ${e.EventId.slice(0, 8)}`);
      say(`${operation.target} ${operation.name} ${target.value}: ${ids.join(", ") || "no event"}`);
    }, "");
  });
  return form;
}

function fillTargets() {
  for (const select of document.querySelectorAll("#actions select[data-kind]")) {
    const wanted = targetsOf(select.dataset.kind);
    // An operation on scale sets (or hosts, or sets) is no use to a fleet without any.
    select.form.hidden = wanted.length === 0;
    const current = [...select.options].map(o => o.value);
    if (wanted.join("\n") !== current.join("\n")) {
      const value = select.value;
      select.replaceChildren(...wanted.map(name => el("option", { value: name }, name)));
      if (wanted.includes(value)) select.value = value;
    }
    fillExamples(select.form);
  }
  const first = state.vms.length ? state.vms[0].name : "vm0";
  const scenario = document.getElementById("scenario-text");
  const example = `steps:\n  - restart: ${first}\n  - advance: 15m`;
  if (scenario.placeholder !== example) scenario.placeholder = example;
}

// The instance ids of a scale set: its VMs are named {set}_{id}.
function instanceIdsOf(scaleSet) {
  return state.vms.filter(v => v.scaleSet === scaleSet).map(v => v.name.slice(scaleSet.length + 1));
}

function fillExamples(form) {
  const target = form.elements.target;
  for (const input of form.querySelectorAll("input[data-example=instance-ids]")) {
    const ids = state && target.value ? instanceIdsOf(target.value) : [];
    const example = ids.length ? ids[0] : "";
    if (input.placeholder !== example) input.placeholder = example;
  }
}

async function loadOperations() {
  const data = await call("GET", "/operations");
  const forms = data.operations.map(operationForm);
  const kind = el("select", { name: "kind", "aria-label": "kind of maintenance" },
    el("option", { value: "update" }, "update (Freeze ~9 s)"),
    el("option", { value: "live-migrate" }, "live-migrate (Freeze 5 s)"),
    el("option", { value: "maintain" }, "maintain (Reboot)"));
  const campaign = el("form", { id: "op-campaign" }, el("strong", {}, "maintenance campaign"),
    kind, el("button", { type: "submit" }, "Start"),
    el("span", { class: "summary" }, "Routine maintenance over the whole fleet, one fault domain at a time."));
  campaign.addEventListener("submit", event => {
    event.preventDefault();
    act(() => call("POST", "/campaigns", { kinds: [kind.value] }), "campaign started");
  });
  document.getElementById("actions").replaceChildren(...forms, campaign);
  if (state) fillTargets();
}

// -- wiring ---------------------------------------------------------------------------------

function renderScenarios() {
  const items = (state.scenarios || []).slice().reverse().map(run => el("li", { "data-run": run.id, "data-status": run.status },
    `${run.name}: `, el("progress", { max: run.steps, value: run.done, "aria-label": `${run.done} of ${run.steps} steps` }),
    ` ${run.done}/${run.steps} ${run.status}`,
    run.detail ? el("div", { class: "failed" }, run.detail) : ""));
  document.getElementById("scenario-runs").replaceChildren(...items);
}

async function loadFlows() {
  const data = await call("GET", "/flows");
  document.getElementById("flow-name").replaceChildren(...data.flows.map(flow =>
    el("option", { value: flow.name, title: `${flow.summary} (${flow.source})` },
      `${flow.name}: ${flow.title} (${flow.origin})`)));
}

function renderCreateEvent() {
  const vms = document.querySelector("#create-event select[name=resources]");
  const wanted = state.vms.map(v => v.name);
  if ([...vms.options].map(o => o.value).join("\n") !== wanted.join("\n")) {
    const chosen = new Set([...vms.selectedOptions].map(o => o.value));
    vms.replaceChildren(...wanted.map(name => el("option", { value: name, selected: chosen.has(name) ? "" : null }, name)));
  }
}

function renderFlowVms() {
  const vm = document.getElementById("flow-vm");
  const wanted = ["", ...state.vms.map(v => v.name)];
  if ([...vm.options].map(o => o.value).join("\n") !== wanted.join("\n")) {
    const value = vm.value;
    vm.replaceChildren(...wanted.map(name => el("option", { value: name }, name || "(the first idle VM it fits)")));
    vm.value = wanted.includes(value) ? value : "";
  }
}

function renderFaults() {
  const form = document.getElementById("op-fault");
  const kind = form.elements.kind;
  if (kind.options.length !== state.faultKinds.length) {
    kind.replaceChildren(...state.faultKinds.map(k => el("option", { value: k }, k)));
  }
  const vm = form.elements.vm;
  const wanted = ["", ...state.vms.map(v => v.name)];
  if ([...vm.options].map(o => o.value).join("\n") !== wanted.join("\n")) {
    const value = vm.value;
    vm.replaceChildren(...wanted.map(name => el("option", { value: name }, name || "(every VM)")));
    vm.value = wanted.includes(value) ? value : "";
  }
  const items = state.faults.map(f => el("li", { "data-fault": f.id },
    `${f.kind}${f.status ? " (" + f.status + ")" : ""} for ${f.vm || "every VM"}` +
    `${f.remaining !== null ? ", " + f.remaining + " left" : ""}` +
    `${f.expiresIn !== null ? ", " + Math.ceil(f.expiresIn) + " s left" : ""}, hits ${f.hits} `,
    el("button", { type: "button", onclick: () => act(() => call("DELETE", `/faults/${f.id}`), `fault ${f.id} cleared`) }, "Clear")));
  document.getElementById("faults").replaceChildren(...items);
}

function renderEventGrid() {
  const rows = (state.eventGrid || []).map(s => el("tr", { "data-subscription": s.name },
    el("td", {}, s.name), el("td", {}, s.schema), el("td", {}, s.provisioningState),
    el("td", {}, String(s.delivered)), el("td", {}, String(s.failed)),
    el("td", {}, String(s.deadLettered)), el("td", {}, String(s.pending)), el("td", {}, s.lastError || "")));
  document.querySelector("#eventgrid tbody").replaceChildren(...rows);
}

function render() {
  renderClock();
  renderEventGrid();
  renderFaults();
  renderFleet();
  renderEvents();
  renderScenarios();
  renderFlowVms();
  renderCreateEvent();
  fillTargets();
  refreshTimeline().catch(error => say(`timeline: ${error.message}`));
}

function onSnapshot(data) {
  state = JSON.parse(data);
  receivedAt = Date.now();
  if (document.getElementById("clock").textContent === "connecting...") say("");
  render();
}

// The server-sent events of /api/v1/stream, read with fetch: EventSource cannot send the
// Authorization header. Each event is a block of "field: value" lines ended by a blank line.
async function connect() {
  if (!TOKEN) { locked(); return; }
  for (;;) {
    try {
      const response = await fetch(`${API}/stream`, { headers: authorised(), credentials: "omit", cache: "no-store" });
      if (response.status === 401) { locked(); return; }
      if (!response.ok || !response.body) throw new Error(response.statusText);
      const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
      let buffer = "";
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buffer += value;
        let end;
        while ((end = buffer.indexOf("\n\n")) >= 0) {
          const block = buffer.slice(0, end);
          buffer = buffer.slice(end + 2);
          const lines = block.split("\n");
          if (lines.includes("event: snapshot")) {
            onSnapshot(lines.filter(line => line.startsWith("data: ")).map(line => line.slice(6)).join("\n"));
          }
        }
      }
    } catch (error) {
      // the server went away or the network dropped: say so, and try again
    }
    say("the control API is not answering; retrying");
    await new Promise(resolve => setTimeout(resolve, 2000));
  }
}

document.getElementById("advance").addEventListener("submit", event => {
  event.preventDefault();
  const seconds = Number(document.getElementById("advance-seconds").value);
  act(() => call("POST", "/clock/advance", { seconds }), `clock advanced ${seconds} s`);
});
document.getElementById("approve-all").addEventListener("click", () => {
  act(() => call("POST", `/vms/${encodeURIComponent(selected)}/approve`, { eventIds: "all" }),
    `approved as ${selected}`);
});
document.getElementById("create-event").addEventListener("submit", event => {
  event.preventDefault();
  const form = event.target;
  const body = {
    type: form.elements.type.value,
    source: form.elements.source.value,
    resources: [...form.elements.resources.selectedOptions].map(o => o.value),
    durationInSeconds: Number(form.elements.durationInSeconds.value || -1),
    description: form.elements.description.value,
    started: form.elements.started.checked,
  };
  if (form.elements.noticeSeconds.value !== "") body.noticeSeconds = Number(form.elements.noticeSeconds.value);
  act(async () => {
    const created = await call("POST", "/events", body);
    say(`created ${created.EventType} ${created.EventId} for ${created.Resources.join(", ")}`);
  }, "");
});
document.getElementById("scenario").addEventListener("submit", event => {
  event.preventDefault();
  const scenario = document.getElementById("scenario-text").value;
  act(() => call("POST", "/scenarios", { scenario }), "scenario started");
});
document.getElementById("flow").addEventListener("submit", event => {
  event.preventDefault();
  const form = event.target;
  const body = { builtin: form.elements.builtin.value, devTiming: form.elements.devTiming.checked };
  if (form.elements.vm.value) body.vm = form.elements.vm.value;
  act(() => call("POST", "/scenarios", body), `flow ${body.builtin} started`);
});
document.getElementById("op-fault").addEventListener("submit", event => {
  event.preventDefault();
  const form = event.target;
  const body = { kind: form.elements.kind.value, probability: Number(form.elements.probability.value) };
  if (form.elements.vm.value) body.vm = form.elements.vm.value;
  if (form.elements.count.value) body.count = Number(form.elements.count.value);
  if (form.elements.seconds.value) body.seconds = Number(form.elements.seconds.value);
  act(() => call("POST", "/faults", body), `fault ${body.kind} set`);
});
if (TOKEN) {
  loadOperations().catch(error => say(`operations: ${error.message}`));
  loadFlows().catch(error => say(`flows: ${error.message}`));
}
connect();
setInterval(tick, 1000);
