// The options a message is sent with (the model, Thinking, Plan, Subagents: kept in the browser),
// and the page's theme.

import { settings } from "./api.js";
import { el } from "./dom.js";

const $ = (id) => document.getElementById(id);
const OPTIONS = { thinking: "opt-thinking", plan: "opt-plan", subagents: "opt-subagents" };
let offered = []; // the models the picker offers

/** Fill the model picker and the switches from what the browser kept. */
export async function loadOptions() {
  const select = $("model");
  try {
    const { models } = await settings.models();
    offered = models;
    const chosen = localStorage.getItem("antler.model");
    select.replaceChildren(
      ...models.map((m) => el("option", { value: m.name, text: m.display_name || m.name, selected: m.name === chosen })),
    );
    select.hidden = models.length === 0;
  } catch {
    select.hidden = true;
  }
  select.addEventListener("change", () => localStorage.setItem("antler.model", select.value));
  for (const [name, id] of Object.entries(OPTIONS)) {
    const box = $(id);
    box.checked = localStorage.getItem(`antler.${name}`) === "1";
    box.addEventListener("change", () => localStorage.setItem(`antler.${name}`, box.checked ? "1" : "0"));
  }
}

/** The model the next message goes to (null: none offered). */
export function chosenModel() {
  return offered.find((m) => m.name === $("model").value) || offered[0] || null;
}

export function chooseModel(name) {
  $("model").value = name;
  localStorage.setItem("antler.model", name);
}

export function runConfig() {
  const opt = (name) => $(OPTIONS[name]).checked;
  const configurable = { thinking_enabled: opt("thinking"), is_plan_mode: opt("plan"), subagent_enabled: opt("subagents") };
  if ($("model").value) configurable.model_name = $("model").value;
  return { configurable };
}

export function applyTheme(theme) {
  if (theme === "light" || theme === "dark") document.documentElement.dataset.theme = theme;
  else delete document.documentElement.dataset.theme;
}

export function cycleTheme(toast) {
  const order = ["auto", "light", "dark"];
  const next = order[(order.indexOf(localStorage.getItem("antler.theme") || "auto") + 1) % 3];
  localStorage.setItem("antler.theme", next);
  applyTheme(next);
  toast(`Theme: ${next}`);
}
