// The Skills settings page: list, switch on/off, install a .skill file, read a skill's SKILL.md, and
// (custom skills, admins) edit it or delete the skill. Changes reach every runner and sandbox at once.

import { call } from "./api.js";
import { confirmInPage } from "./confirm.js";
import { el } from "./dom.js";

const q = encodeURIComponent;

const api = {
  list: () => call("/skills"),
  switch: (name, enabled) => call(`/skills/${q(name)}`, { method: "PUT", json: { enabled } }),
  install: (file) => {
    const form = new FormData();
    form.append("file", file, file.name);
    return call("/skills/install", { method: "POST", body: form });
  },
  content: (name) => call(`/skills/custom/${q(name)}`),
  edit: (name, content) => call(`/skills/custom/${q(name)}`, { method: "PUT", json: { content } }),
  remove: (name) => call(`/skills/custom/${q(name)}`, { method: "DELETE" }),
  history: (name) => call(`/skills/custom/${q(name)}/history`),
  // DeerFlow's rollback undoes the change at `history_index`: restoring entry i undoes change i + 1.
  restore: (name, index) => call(`/skills/custom/${q(name)}/rollback`, { method: "POST", json: { history_index: index + 1 } }),
};

function failed(body, error) {
  body.replaceChildren(el("p", { class: "error", role: "alert", text: error.message }));
}

/** One skill's card: its switch, what it is, and its actions; `redo` redraws the page. */
function card(skill, toast, redo) {
  const box = el("input", { type: "checkbox", checked: skill.enabled, "aria-label": `Enable ${skill.name}` });
  box.addEventListener("change", () =>
    api
      .switch(skill.name, box.checked)
      .then(() => toast(`${skill.name} ${box.checked ? "enabled" : "disabled"}`))
      .catch((error) => {
        box.checked = !box.checked;
        toast(error.message, "error");
      }),
  );
  const detail = el("div", { class: "skill-detail" });
  const show = async () => {
    if (detail.childElementCount) return detail.replaceChildren();
    try {
      const { content } = await api.content(skill.name);
      detail.replaceChildren(el("pre", { class: "skill-md", "aria-label": `${skill.name} SKILL.md`, text: content }));
    } catch (error) {
      toast(error.message, "error");
    }
  };
  const edit = async () => {
    try {
      const { content } = await api.content(skill.name);
      const text = el("textarea", { class: "skill-editor", rows: 16, "aria-label": `Edit ${skill.name} SKILL.md` });
      text.value = content;
      const form = el(
        "form",
        { class: "skill-edit" },
        text,
        el(
          "div",
          { class: "row" },
          el("button", { type: "submit", class: "primary", text: "Save" }),
          el("button", { type: "button", text: "Cancel", onclick: () => detail.replaceChildren() }),
        ),
      );
      form.addEventListener("submit", (event) => {
        event.preventDefault();
        api
          .edit(skill.name, text.value)
          .then(() => (toast(`${skill.name} saved`), redo()))
          .catch((error) => toast(error.message, "error"));
      });
      detail.replaceChildren(form);
      text.focus();
    } catch (error) {
      toast(error.message, "error");
    }
  };
  const remove = async () => {
    const sure = await confirmInPage(
      `Delete the skill ${skill.name}?`,
      "Delete",
      "It goes for every user and every machine, with all its versions.",
    );
    if (!sure) return;
    api
      .remove(skill.name)
      .then(() => (toast(`${skill.name} deleted`), redo()))
      .catch((error) => toast(error.message, "error"));
  };
  const history = async () => {
    try {
      const { history: versions } = await api.history(skill.name);
      const entry = (version, index) =>
        el(
          "li",
          { class: "skill-version" },
          el("span", { text: `${new Date(version.ts).toLocaleString()} · ${version.action}${version.author ? ` by ${version.author}` : ""}` }),
          version.current
            ? el("span", { class: "badge", text: "current" })
            : el("button", {
                type: "button",
                class: "small",
                text: "Restore",
                "aria-label": `Restore ${skill.name} version ${index + 1}`,
                onclick: () =>
                  api
                    .restore(skill.name, index)
                    .then(() => (toast(`${skill.name} restored`), redo()))
                    .catch((error) => toast(error.message, "error")),
              }),
        );
      detail.replaceChildren(el("ol", { class: "skill-history", "aria-label": `${skill.name} versions` }, versions.map(entry)));
    } catch (error) {
      toast(error.message, "error");
    }
  };
  const button = (text, onclick) => el("button", { type: "button", class: "small", text, "aria-label": `${text} ${skill.name}`, onclick });
  return el(
    "li",
    { class: "card", "data-skill": skill.name },
    el("label", { class: "switch" }, box, el("strong", { text: skill.name })),
    el("span", { class: "badge", text: skill.category }),
    el("p", { class: "muted", text: skill.description }),
    el(
      "div",
      { class: "row skill-actions" },
      button("View", show),
      skill.editable ? button("Edit", edit) : null,
      skill.editable ? button("History", history) : null,
      skill.editable ? button("Delete", remove) : null,
    ),
    detail,
  );
}

export async function skillsPage(body, toast) {
  const { skills } = await api.list();
  const redo = () => skillsPage(body, toast).catch((e) => failed(body, e));
  const picker = el("input", { type: "file", accept: ".skill,.zip", hidden: true, "aria-label": "Skill file" });
  picker.addEventListener("change", async () => {
    const file = picker.files[0];
    if (!file) return;
    try {
      const answer = await api.install(file);
      toast(answer.message);
      redo();
    } catch (error) {
      toast(error.message, "error");
    }
  });
  body.replaceChildren(
    el("h2", { text: "Skills" }),
    el("p", {
      class: "muted",
      text: "Skills are instructions and scripts the agent can follow. Switched-off skills are not offered to it. Installing, editing, deleting and switching are for admins; they reach every machine.",
    }),
    skills.length
      ? el("ul", { class: "cards" }, skills.map((skill) => card(skill, toast, redo)))
      : el("p", { class: "muted", text: "No skills installed." }),
    el("button", { type: "button", class: "primary", text: "Install a .skill file", onclick: () => picker.click() }),
    picker,
  );
}
