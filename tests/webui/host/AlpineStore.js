// Host stand-in for A0's /js/AlpineStore.js: createStore(name, state) registers `state` as an Alpine
// store (now, or when Alpine starts) and returns a proxy that reads and writes the live store.

const stores = new Map();

export function createStore(name, initialState) {
  const live = () => globalThis.Alpine?.store(name);
  const proxy = new Proxy(initialState, {
    get(target, prop) {
      const store = live();
      return store ? store[prop] : target[prop];
    },
    set(target, prop, value) {
      const store = live();
      if (store) store[prop] = value;
      else target[prop] = value;
      return true;
    },
  });
  if (globalThis.Alpine) globalThis.Alpine.store(name, initialState);
  else document.addEventListener("alpine:init", () => globalThis.Alpine.store(name, initialState));
  stores.set(name, proxy);
  return proxy;
}

export function getStore(name) {
  return stores.get(name);
}
