// The settings panel's behaviour (config.html binds to it): defaults for missing keys, checks before
// sending, Test connection on the unsaved form values, and the live status while the panel is open.
//
// Each opening of the panel gets its own instance (x-data="$store.a0RerankerConfig.createPanel()"),
// so nothing is shared between openings, and Alpine calls destroy() when the modal closes, which
// stops the status refresh.

import { createStore } from "/js/AlpineStore.js";
import { callJsonApi } from "/js/api.js";
import { toastFrontendError, toastFrontendSuccess } from "/components/notifications/notification-store.js";
import {
  ENDPOINT_KEY,
  PLUGIN_NAME,
  fillMissing,
  joinEndpointList,
  loadDefaults,
  loadSchema,
  missingKeys,
  panelSections,
  plainCopy,
  settingProblems,
} from "./reranker-settings.js";
import { statusView, testView } from "./reranker-views.js";

export const STATUS_REFRESH_MS = 3000;
const TOAST_TITLE = "Reranker";

function createPanel() {
  return {
    // every field is declared here: Alpine writes an undeclared one into the modal's own scope
    schema: null,
    sections: [],
    defaults: null,
    loadError: "",
    testing: false,
    test: null,
    testAttempted: false,
    status: null,
    statusError: "",
    statusUpdated: "",
    statusEveryS: STATUS_REFRESH_MS / 1000,
    _ready: null,
    _timer: null,
    _open: false,
    _scopeKey: null,

    init() {
      this._open = true;
      this._ready = this._load();
      this.refreshStatus().finally(() => this._scheduleStatus());
    },

    destroy() {
      this._open = false;
      clearTimeout(this._timer);
      this._timer = null;
    },

    async _load() {
      try {
        // the fields are drawn as soon as the schema is here, with their limits; the checks wait for the defaults
        const schema = loadSchema().then((loaded) => {
          this.schema = loaded;
          this.sections = panelSections(loaded);
        });
        const [, defaults] = await Promise.all([schema, loadDefaults(callJsonApi)]);
        this.defaults = defaults;
      } catch (error) {
        this.loadError = `The panel could not load the plugin's defaults and limits: ${messageOf(error)}`;
        toastFrontendError(this.loadError, TOAST_TITLE);
      }
    },

    /**
     * Fill the keys an older config.json lacks, and join an endpoint saved as a list (x-effect: runs
     * again when the modal reloads settings).
     */
    adoptLoaded(config) {
      const missing = this.defaults ? missingKeys(config ?? {}, this.defaults).length > 0 : false;
      if (!config || !(missing || Array.isArray(config[ENDPOINT_KEY]))) return;
      const context = this.context;
      const unchanged = context?._toComparableJson?.(config) === context?.settingsSnapshotJson;
      if (missing) fillMissing(config, this.defaults);
      joinEndpointList(config);
      // what the plugin uses anyway (the defaults, the same replicas): not an unsaved change of the user's
      if (unchanged && context) context.settingsSnapshotJson = context._toComparableJson(config);
    },

    /** Messages under the fields; the endpoint is required only once Test was clicked. */
    get problems() {
      if (!this.schema || !this.defaults || !this.config) return {};
      return settingProblems(this.config, this.schema, { requireEndpoint: this.testAttempted });
    },

    problem(key) {
      return this.problems[key] || "";
    },

    /** `{min, max}` of a number setting, for the inputs' own limits. */
    limit(key) {
      return this.schema?.settings?.[key] ?? {};
    },

    async testConnection() {
      if (this.testing) return;
      this.testAttempted = true;
      this.testing = true;
      this.test = null;
      try {
        await this._ready;
        if (!this.defaults) throw new Error(this.loadError || "the panel is not ready");
        const problems = this.problems;
        const keys = Object.keys(problems);
        if (keys.length > 0) return this._refuse(keys);
        const reply = await callJsonApi(`/plugins/${PLUGIN_NAME}/test_connection`, {
          config: plainCopy(this.config),
          ...this.scope, // A0's recall LLM steps in this scope share the time the reranker may use
        });
        this.test = testView(reply);
        if (this.test.ok) toastFrontendSuccess(this.test.message, TOAST_TITLE);
        else toastFrontendError(this.test.message, TOAST_TITLE);
      } catch (error) {
        this.test = testView({ ok: false, message: `The test could not run: ${messageOf(error)}` }, { sent: false });
        toastFrontendError(this.test.message, TOAST_TITLE);
      } finally {
        this.testing = false;
      }
    },

    _refuse(keys) {
      const names = keys.map((key) => this.titleOf(key)).join(", ");
      const message = `Fix ${keys.length === 1 ? "this setting" : "these settings"} first: ${names}. Nothing was sent.`;
      this.test = testView({ ok: false, message }, { sent: false });
      toastFrontendError(message, TOAST_TITLE);
    },

    titleOf(key) {
      return this.sections.flatMap((section) => section.fields).find((field) => field.key === key)?.title || key;
    },

    /** The scope A0's modal shows (project, agent profile; "" = Global, All profiles). */
    get scope() {
      return { project_name: this.context?.projectName || "", agent_profile: this.context?.agentProfileKey || "" };
    },

    /** The scope's name in A0's own words ("Global, All profiles"), from the modal's labels when it has them. */
    scopeLabel(scope) {
      const context = this.context;
      const project = context?.projectLabel?.(scope.projectName) ?? (scope.projectName || "Global");
      const profile = context?.agentProfileLabel?.(scope.agentProfile) ?? (scope.agentProfile || "All profiles");
      return `${project}, ${profile}`;
    },

    /** x-effect: when the modal switches scope, show that scope's status at once. */
    followScope(scope) {
      const key = JSON.stringify([scope.project_name, scope.agent_profile]);
      if (this._scopeKey !== null && this._scopeKey !== key) this.refreshStatus();
      this._scopeKey = key;
    },

    async refreshStatus() {
      try {
        const reply = await callJsonApi(`/plugins/${PLUGIN_NAME}/status`, this.scope);
        if (!reply?.success) throw new Error(reply?.message || "no status");
        this.status = statusView(reply);
        this.statusError = "";
      } catch (error) {
        this.statusError = `Status is unavailable: ${messageOf(error)}`;
      }
      this.statusUpdated = new Date().toLocaleTimeString();
    },

    _scheduleStatus() {
      if (!this._open) return;
      this._timer = setTimeout(async () => {
        this._timer = null;
        if (!this._open) return;
        if (!this.$root?.isConnected) return this.destroy();
        if (!document.hidden) await this.refreshStatus();
        this._scheduleStatus();
      }, STATUS_REFRESH_MS);
    },
  };
}

function messageOf(error) {
  const text = error?.message || String(error);
  return text.length > 300 ? `${text.slice(0, 300)}…` : text;
}

export const store = createStore("a0RerankerConfig", { createPanel });
