// Host stand-in for A0's /js/modals.js: openModal(path) builds the modal shell, loads the component
// into its body, takes the title from the component's <title> and moves a [data-modal-footer] into
// the footer slot; closeModal() removes the modal element, which makes Alpine destroy everything
// inside it (x-destroy, x-data destroy()).

import { importComponent } from "/js/components.js";

const stack = [];

export async function openModal(path) {
  const modal = document.createElement("div");
  modal.className = "modal show";
  modal.innerHTML = `
    <div class="modal-inner" x-data>
      <div class="modal-header">
        <h2 class="modal-title"></h2>
        <button type="button" class="modal-close">&times;</button>
      </div>
      <div class="modal-scroll"><div class="modal-bd"></div></div>
      <div class="modal-footer-slot" style="display: none"></div>
    </div>`;
  modal.querySelector(".modal-close").addEventListener("click", () => closeModal());
  document.body.appendChild(modal);
  stack.push(modal);
  const doc = await importComponent(path, modal.querySelector(".modal-bd"));
  modal.querySelector(".modal-title").textContent = doc?.title || path;
  requestAnimationFrame(() => {
    const footer = modal.querySelector(".modal-bd [data-modal-footer]");
    const slot = modal.querySelector(".modal-footer-slot");
    if (!footer) return;
    slot.appendChild(footer);
    slot.style.display = "block";
    modal.querySelector(".modal-inner").classList.add("modal-with-footer");
  });
}

export async function closeModal() {
  const modal = stack.pop();
  if (!modal) return false;
  modal.remove();
  document.dispatchEvent(new CustomEvent("modal-closed", { detail: { remainingModalCount: stack.length } }));
  return true;
}

globalThis.openModal = openModal;
globalThis.closeModal = closeModal;
