// Icons as inline SVG (Lucide's, vendored): they look the same on every machine, where a glyph
// such as a thumbs-up or a fork drew an empty box without an emoji font. They take the text's colour.

import { ICONS } from "../vendor/lucide/icons.js";

const SVG = "http://www.w3.org/2000/svg";
// What the markup names, by what it means here.
const NAMES = {
  branch: "git-branch",
  good: "thumbs-up",
  bad: "thumbs-down",
  regenerate: "refresh-cw",
  edit: "pencil",
  close: "x",
  remove: "x",
  download: "download",
  goal: "target",
  settings: "settings",
  theme: "sun-moon",
  menu: "menu",
  stop: "square",
  done: "check",
  failed: "circle-alert",
  todo: "square",
  "todo-done": "square-check",
  "todo-doing": "circle-dashed",
  running: "loader-circle",
  waiting: "circle-dashed", // a tool call waiting for approval
};

/** The icon called `name` (a key of NAMES) as an <svg>, hidden from screen readers (the button says). */
export function icon(name) {
  const nodes = ICONS[NAMES[name] || name];
  if (!nodes) throw new Error(`no icon ${name}`);
  const svg = document.createElementNS(SVG, "svg");
  for (const [key, value] of Object.entries({ class: `i i-${name}`, viewBox: "0 0 24 24", fill: "none", stroke: "currentColor", "stroke-width": "2", "stroke-linecap": "round", "stroke-linejoin": "round", "aria-hidden": "true", focusable: "false" })) {
    svg.setAttribute(key, value);
  }
  for (const [tag, attrs] of nodes) {
    const child = document.createElementNS(SVG, tag);
    for (const [key, value] of Object.entries(attrs)) child.setAttribute(key, value);
    svg.append(child);
  }
  return svg;
}

/** Put each `<span data-icon="name">` of the page's markup to its icon. */
export function fillIcons(root = document) {
  for (const slot of root.querySelectorAll("[data-icon]")) slot.replaceChildren(icon(slot.dataset.icon));
}
