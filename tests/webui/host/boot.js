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

// What a plugin's config.html sees as `context`: the modal's store instance (already reactive), every
// property it reads, writes, asks for or deletes recorded in globalThis.__a0ContextTouched. Methods run
// on the instance itself, so what A0's own code does inside them is not the plugin's touch.
const touched = new Set();
globalThis.__a0ContextTouched = touched;
const ALPINE_INTERNALS = /^(__v_|_x_)/; // what @vue/reactivity and Alpine ask of every object

function record(key) {
  if (typeof key === "string" && !ALPINE_INTERNALS.test(key)) touched.add(key);
}

globalThis.auditedContext = (instance) =>
  new Proxy(instance, {
    get(target, key) {
      record(key);
      const value = Reflect.get(target, key);
      return typeof value === "function" ? value.bind(target) : value;
    },
    set(target, key, value) {
      record(key);
      return Reflect.set(target, key, value);
    },
    has(target, key) {
      record(key);
      return Reflect.has(target, key);
    },
    deleteProperty(target, key) {
      record(key);
      return Reflect.deleteProperty(target, key);
    },
  });

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
