// Host start-up in A0's order: the modules that create stores, then Alpine (A0 v1.7 ships 3.14.9,
// the same version the tests install), then the directives and magic A0 adds: x-destroy, x-create
// and $instantiate (a copy of a store whose getters and methods keep working).

import "/js/components.js";
import "/js/modals.js";
import "/components/notifications/notification-store.js";
import { store as pluginSettings } from "/components/plugins/plugin-settings-store.js";

function instantiate(source) {
  const copy = {};
  for (const [key, descriptor] of Object.entries(Object.getOwnPropertyDescriptors(source))) {
    if (descriptor.get || descriptor.set || typeof descriptor.value === "function") {
      Object.defineProperty(copy, key, descriptor);
      continue;
    }
    const value = descriptor.value;
    const fresh = Array.isArray(value)
      ? value.map((item) => (item && typeof item === "object" ? { ...item } : item))
      : value && typeof value === "object" ? { ...value } : value;
    Object.defineProperty(copy, key, { ...descriptor, value: fresh });
  }
  return copy;
}

document.addEventListener("alpine:init", () => {
  const Alpine = globalThis.Alpine;
  Alpine.directive("destroy", (_el, { expression }, { evaluateLater, cleanup }) => {
    const onDestroy = evaluateLater(expression);
    cleanup(() => onDestroy());
  });
  Alpine.directive("create", (_el, { expression }, { evaluateLater }) => evaluateLater(expression)());
  Alpine.magic("instantiate", () => instantiate);
});

await import("/vendor/alpine/alpine.min.js");

globalThis.openPluginSettings = (name, project = "", profile = "") => pluginSettings.openConfig(name, project, profile);
globalThis.__hostReady = true;
