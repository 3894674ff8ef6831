// The settings panel's behaviour (config.html binds to it): checks before sending, Test connection on
// the unsaved form values, and the live status while the panel is open.
//
// Each opening of the panel gets its own instance (x-data="$store.a0RerankerConfig.createPanel()"),
// so nothing is shared between openings, and Alpine calls destroy() when the modal closes, which
// stops the status refresh.
//
// Of A0's settings modal it uses only what A0 documents for a plugin's config.html: `config` (the
// settings, bound by the fields) and `context.projectName` / `context.agentProfileKey` (the scope).
// The settings arrive complete: the plugin's extension of A0's get_config fills the keys an older
// config.json lacks on the server (a0_hooks/settings_modal.py). Failures are said through A0's
// notifications, not in red lines of the panel's own.

import { createStore } from "/js/AlpineStore.js";
import { callJsonApi } from "/js/api.js";
import { toastFrontendError, toastFrontendSuccess } from "/components/notifications/notification-store.js";
import { PLUGIN_NAME, loadSchema, panelSections, plainCopy, settingProblems } from "/plugins/a0_reranker/webui/reranker-settings.js";
import { statusView, testView } from "/plugins/a0_reranker/webui/reranker-views.js";

export const STATUS_REFRESH_MS = 3000;
const TOAST_TITLE = "Reranker";

function createPanel() {
  return {
    // every field is declared here: Alpine writes an undeclared one into the modal's own scope
    schema: null,
    sections: [],
    ready: false,
    failed: false,
    testing: false,
    test: null,
    testAttempted: false,
    status: null,
    statusFailing: false,
    statusUpdated: "",
    _toldProblems: "",
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

    /** The fields and their limits; without them nothing can be drawn or checked, which a toast says. */
    async _load() {
      try {
        this.schema = await loadSchema();
        this.sections = panelSections(this.schema);
        this.ready = true;
      } catch (error) {
        this.failed = true;
        toastFrontendError(`The panel could not load its fields and limits: ${messageOf(error)}`, TOAST_TITLE);
      }
    },

    /** Messages under the fields; the endpoint is required only once Test was clicked. */
    get problems() {
      if (!this.schema || !this.config) return {};
      return settingProblems(this.config, this.schema, { requireEndpoint: this.testAttempted });
    },

    problem(key) {
      return this.problems[key] || "";
    },

    /** How many settings of a section need fixing (its summary says so while it is folded). */
    sectionProblems(section) {
      return section.fields.filter((field) => this.problem(field.key)).length;
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
        if (!this.ready) throw new Error("the panel could not load its fields");
        const keys = Object.keys(this.problems);
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

    /** x-effect: when the modal switches scope, show that scope's status at once. */
    followScope(scope) {
      const key = JSON.stringify([scope.project_name, scope.agent_profile]);
      if (this._scopeKey !== null && this._scopeKey !== key) this.refreshStatus();
      this._scopeKey = key;
    },

    /** The live status; when it cannot be had, one toast (not one per refresh) until it is back. */
    async refreshStatus() {
      try {
        const reply = await callJsonApi(`/plugins/${PLUGIN_NAME}/status`, this.scope);
        if (!reply?.success) throw new Error(reply?.message || "no status");
        this.status = statusView(reply);
        this._tellProblems(this.status.problems);
        this.statusFailing = false;
        this.statusUpdated = new Date().toLocaleTimeString();
      } catch (error) {
        if (!this.statusFailing) toastFrontendError(`Live status is unavailable: ${messageOf(error)}`, TOAST_TITLE);
        this.statusFailing = true;
      }
    },

    /** Invalid saved settings, said once as a notification (the Mode tile keeps listing them). */
    _tellProblems(problems) {
      const told = problems.join("; ");
      if (told && told !== this._toldProblems) {
        toastFrontendError(`The saved settings are invalid: ${told}`, TOAST_TITLE);
      }
      this._toldProblems = told;
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
