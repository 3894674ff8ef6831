// Host stand-in for A0's notification store: every toast is recorded in globalThis.__a0Toasts
// ({type, message, title}) for the tests, and shown nowhere.

export const toasts = [];
globalThis.__a0Toasts = toasts;

function recorder(type) {
  return async (message, title = "") => {
    toasts.push({ type, message: String(message ?? ""), title: String(title ?? "") });
  };
}

export const toastFrontendInfo = recorder("info");
export const toastFrontendSuccess = recorder("success");
export const toastFrontendWarning = recorder("warning");
export const toastFrontendError = recorder("error");
export const toastFrontendProgress = recorder("progress");

export const store = {
  frontendInfo: toastFrontendInfo,
  frontendSuccess: toastFrontendSuccess,
  frontendWarning: toastFrontendWarning,
  frontendError: toastFrontendError,
  frontendProgress: toastFrontendProgress,
};

Object.assign(globalThis, {
  toastFrontendInfo, toastFrontendSuccess, toastFrontendWarning, toastFrontendError, toastFrontendProgress,
  justToast: (message, type = "info") => toasts.push({ type, message: String(message ?? ""), title: "" }),
});
