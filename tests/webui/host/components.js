// Host stand-in for A0's /js/components.js: an <x-component path="..."> element, whenever it enters
// the page, is filled with that HTML file: its <style>s are added, its module scripts imported
// (src ones by URL, inline ones as blobs) and awaited, and only then its body nodes appended, so a
// store a component's script creates exists before Alpine sees the markup that uses it.

const loading = new WeakSet();

export async function importComponent(path, target) {
  if (!path || loading.has(target)) return null;
  loading.add(target);
  try {
    const url = path.startsWith("/") ? path : `/components/${path}`;
    const response = await fetch(url);
    if (!response.ok) throw new Error(`component ${path}: HTTP ${response.status}`);
    const doc = new DOMParser().parseFromString(await response.text(), "text/html");
    const modules = [];
    for (const script of doc.querySelectorAll("script")) {
      if (script.type === "module") modules.push(importModule(script));
      else target.appendChild(copyScript(script));
    }
    for (const style of doc.querySelectorAll("style, link[rel=stylesheet]")) {
      target.appendChild(style.cloneNode(true));
    }
    await Promise.all(modules);
    for (const node of [...doc.body.childNodes]) {
      if (node.nodeName !== "SCRIPT" && node.nodeName !== "STYLE") target.appendChild(node.cloneNode(true));
    }
    return doc;
  } finally {
    loading.delete(target);
  }
}

function importModule(script) {
  const src = script.getAttribute("src");
  if (src) return import(new URL(src, location.origin).href);
  const blob = new Blob([script.textContent], { type: "text/javascript" });
  const blobUrl = URL.createObjectURL(blob);
  return import(blobUrl).finally(() => URL.revokeObjectURL(blobUrl));
}

function copyScript(script) {
  const copy = document.createElement("script");
  for (const attribute of script.attributes) copy.setAttribute(attribute.name, attribute.value);
  copy.textContent = script.textContent;
  return copy;
}

export function loadComponents(roots = [document.documentElement]) {
  const found = roots.flatMap((root) => [...root.querySelectorAll("x-component")]);
  return Promise.all(found.map((element) => importComponent(element.getAttribute("path"), element)));
}

new MutationObserver((mutations) => {
  for (const mutation of mutations) {
    for (const node of mutation.addedNodes) {
      if (node.nodeType !== Node.ELEMENT_NODE) continue;
      if (node.matches("x-component")) importComponent(node.getAttribute("path"), node);
      else loadComponents([node]);
    }
  }
}).observe(document.body, { childList: true, subtree: true });
