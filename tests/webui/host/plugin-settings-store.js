// Host stand-in for A0's plugin-settings-store.js (v1.7), reduced to what a plugin's config.html meets:
// openConfig(name, project, profile) loads the plugin's meta (plugins_list), the projects and agent
// profiles the scope selectors offer (/api/projects list_options, /api/agents list), resolves the scope
// as A0 does (a project only if per_project_config, a profile only if per_agent_config, each only if it
// exists), loads the settings with /api/plugins {action: "get_config"} for that scope and opens the
// modal; the modal instantiates this store as `context` and exposes `context.settings` as `config`.
// Changing a selector reloads the scope's settings (onScopeChanged); scopeMismatchMessage says when
// the scope has no settings of its own. Save posts save_config for the scope, Default loads
// get_default_config, cleanup() runs when the modal goes away. Not reproduced: the per-scope Enabled
// toggle (A0's plugin-toggle store), the list of existing configurations, the confirm dialogs.

import { createStore } from "/js/AlpineStore.js";
import { callJsonApi, fetchApi } from "/js/api.js";
import { openModal, closeModal } from "/js/modals.js";

async function post(path, body) {
  const response = await fetchApi(path, {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify(body),
  });
  return response.json().catch(() => ({}));
}

const model = {
  pluginName: null,
  pluginMeta: null,
  projects: [],
  agentProfiles: [],
  projectName: "",
  agentProfileKey: "",
  settings: {},
  settingsSnapshotJson: "",
  previousProjectName: "",
  previousAgentProfileKey: "",
  loadedPath: "",
  loadedProjectName: "",
  loadedAgentProfile: "",
  perProjectConfig: true,
  perAgentConfig: true,
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

  confirmDiscardUnsavedChanges() {
    if (!this.hasUnsavedChanges) return true;
    return window.confirm("You have unsaved changes that will be lost. Continue?");
  },

  async _loadPluginMeta(pluginName) {
    const response = await callJsonApi("plugins_list", { filter: { custom: true, builtin: true, search: "" } });
    const plugins = Array.isArray(response?.plugins) ? response.plugins : [];
    return plugins.find((plugin) => plugin?.name === pluginName) || null;
  },

  _resolveScope(pluginMeta, projectName = "", agentProfileKey = "") {
    const hasProject = (this.projects || []).some((project) => project?.key === projectName);
    const hasProfile = (this.agentProfiles || []).some((profile) => profile?.key === agentProfileKey);
    return {
      projectName: pluginMeta?.per_project_config && projectName && hasProject ? projectName : "",
      agentProfileKey: pluginMeta?.per_agent_config && agentProfileKey && hasProfile ? agentProfileKey : "",
    };
  },

  async onScopeChanged() {
    const next = [this.projectName || "", this.agentProfileKey || ""];
    const previous = [this.previousProjectName || "", this.previousAgentProfileKey || ""];
    if (next[0] === previous[0] && next[1] === previous[1]) return;
    if (!this.confirmDiscardUnsavedChanges()) {
      [this.projectName, this.agentProfileKey] = previous;
      return;
    }
    await this.loadSettings();
  },

  projectLabel(key) {
    if (!key) return "Global";
    return (this.projects || []).find((p) => p.key === key)?.label || key;
  },

  agentProfileLabel(key) {
    if (!key) return "All profiles";
    return (this.agentProfiles || []).find((p) => p.key === key)?.label || key;
  },

  get scopeMismatchMessage() {
    if (!this.loadedPath) return "";
    const selected = [this.projectName || "", this.agentProfileKey || ""];
    const loaded = [this.loadedProjectName || "", this.loadedAgentProfile || ""];
    if (selected[0] === loaded[0] && selected[1] === loaded[1]) return "";
    return `Settings do not yet exist for this combination, settings from ${this.projectLabel(loaded[0])}, ${this.agentProfileLabel(loaded[1])} (${this.loadedPath}) will apply.`;
  },

  async openConfig(pluginName, projectName = "", agentProfile = "") {
    this.cleanup();
    const pluginMeta = await this._loadPluginMeta(pluginName);
    if (!pluginMeta) throw new Error(`Plugin "${pluginName}" not found.`);
    const [projects, profiles] = await Promise.all([
      post("/projects", { action: "list_options" }),
      post("/agents", { action: "list" }),
    ]);
    this.projects = projects.ok ? projects.data || [] : [];
    this.agentProfiles = profiles.ok ? profiles.data || [] : [];
    const scope = this._resolveScope(pluginMeta, projectName, agentProfile);
    this.pluginName = pluginMeta.name;
    this.pluginMeta = pluginMeta;
    this.projectName = scope.projectName;
    this.agentProfileKey = scope.agentProfileKey;
    this.perProjectConfig = !!pluginMeta.per_project_config;
    this.perAgentConfig = !!pluginMeta.per_agent_config;
    await this.loadSettings();
    await openModal("/components/plugins/plugin-settings.html");
  },

  async loadSettings() {
    if (!this.pluginName) return;
    this.isLoading = true;
    this.error = null;
    try {
      const result = await post("/plugins", {
        action: "get_config",
        plugin_name: this.pluginName,
        project_name: this.projectName || "",
        agent_profile: this.agentProfileKey || "",
      });
      this.settings = result.ok ? result.data || {} : {};
      this.loadedPath = result.loaded_path || "";
      this.loadedProjectName = result.loaded_project_name || "";
      this.loadedAgentProfile = result.loaded_agent_profile || "";
      if (!result.ok) this.error = result.error || "Failed to load settings";
    } finally {
      this.settingsSnapshotJson = this._toComparableJson(this.settings);
      this.previousProjectName = this.projectName || "";
      this.previousAgentProfileKey = this.agentProfileKey || "";
      this.isLoading = false;
    }
  },

  async resetToDefault() {
    const result = await post("/plugins", { action: "get_default_config", plugin_name: this.pluginName });
    if (result.ok) this.settings = result.data || {};
  },

  async save() {
    this.isSaving = true;
    this.error = null;
    try {
      const result = await post("/plugins", {
        action: "save_config",
        plugin_name: this.pluginName,
        project_name: this.projectName || "",
        agent_profile: this.agentProfileKey || "",
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
    this.pluginMeta = null;
    this.projects = [];
    this.agentProfiles = [];
    this.projectName = "";
    this.agentProfileKey = "";
    this.settings = {};
    this.settingsSnapshotJson = "";
    this.previousProjectName = "";
    this.previousAgentProfileKey = "";
    this.loadedPath = "";
    this.loadedProjectName = "";
    this.loadedAgentProfile = "";
    this.error = null;
    this.isLoading = false;
    this.isSaving = false;
    this.perProjectConfig = true;
    this.perAgentConfig = true;
  },

  get settingsComponentHtml() {
    if (!this.pluginName) return "";
    return `<x-component path="/plugins/${this.pluginName}/webui/config.html"></x-component>`;
  },
};

export const store = createStore("pluginSettingsPrototype", model);
