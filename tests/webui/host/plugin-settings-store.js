// Host stand-in for A0's plugin-settings-store.js, reduced to what a plugin's config.html meets:
// openConfig(name) loads the settings with /api/plugins {action: "get_config"} and opens the modal;
// the modal instantiates this store as `context` and exposes `context.settings` as `config`; Save
// posts save_config, Default loads get_default_config, cleanup() runs when the modal goes away.
// The project and agent-profile scope selectors of A0 are not reproduced (global scope only).

import { createStore } from "/js/AlpineStore.js";
import { fetchApi } from "/js/api.js";
import { openModal, closeModal } from "/js/modals.js";

async function postPlugins(body) {
  const response = await fetchApi("/plugins", {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify(body),
  });
  return response.json().catch(() => ({}));
}

const model = {
  pluginName: null,
  settings: {},
  settingsSnapshotJson: "",
  projectName: "",
  agentProfileKey: "",
  perProjectConfig: false,
  perAgentConfig: false,
  loadedPath: "",
  isLoading: false,
  isSaving: false,
  error: null,

  _toComparableJson(value) {
    try {
      return JSON.stringify(value ?? {});
    } catch {
      return "";
    }
  },

  get hasUnsavedChanges() {
    return this._toComparableJson(this.settings) !== (this.settingsSnapshotJson || "");
  },

  async openConfig(pluginName) {
    this.cleanup();
    this.pluginName = pluginName;
    await this.loadSettings();
    await openModal("/components/plugins/plugin-settings.html");
  },

  async loadSettings() {
    this.isLoading = true;
    this.error = null;
    try {
      const result = await postPlugins({
        action: "get_config",
        plugin_name: this.pluginName,
        project_name: this.projectName,
        agent_profile: this.agentProfileKey,
      });
      this.settings = result.ok ? result.data || {} : {};
      this.loadedPath = result.loaded_path || "";
      if (!result.ok) this.error = result.error || "Failed to load settings";
    } finally {
      this.settingsSnapshotJson = this._toComparableJson(this.settings);
      this.isLoading = false;
    }
  },

  async resetToDefault() {
    const result = await postPlugins({ action: "get_default_config", plugin_name: this.pluginName });
    if (result.ok) this.settings = result.data || {};
  },

  async save() {
    this.isSaving = true;
    this.error = null;
    try {
      const result = await postPlugins({
        action: "save_config",
        plugin_name: this.pluginName,
        project_name: this.projectName,
        agent_profile: this.agentProfileKey,
        settings: this.settings,
      });
      if (!result.ok) this.error = result.error || "Save failed";
      else {
        this.settingsSnapshotJson = this._toComparableJson(this.settings);
        closeModal();
      }
    } finally {
      this.isSaving = false;
    }
  },

  cleanup() {
    this.pluginName = null;
    this.settings = {};
    this.settingsSnapshotJson = "";
    this.loadedPath = "";
    this.error = null;
    this.isLoading = false;
    this.isSaving = false;
  },

  get settingsComponentHtml() {
    if (!this.pluginName) return "";
    return `<x-component path="/plugins/${this.pluginName}/webui/config.html"></x-component>`;
  },
};

export const store = createStore("pluginSettingsPrototype", model);
