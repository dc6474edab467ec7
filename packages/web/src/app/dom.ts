/** The page's elements, found once; a missing id is a broken build, said at start-up. */
function byId<T extends HTMLElement>(id: string, type: { new (): T }): T {
  const element = document.getElementById(id);
  if (!(element instanceof type)) throw new Error(`index.html has no <${type.name}> #${id}`);
  return element;
}

export function pageElements() {
  return {
    modelStatus: byId("model-status", HTMLElement),
    urlForm: byId("url-form", HTMLFormElement),
    modelUrl: byId("model-url", HTMLInputElement),
    modelFile: byId("model-file", HTMLInputElement),
    served: byId("served", HTMLElement),
    servedModels: byId("served-models", HTMLUListElement),
    progress: byId("progress", HTMLElement),
    progressBar: byId("progress-bar", HTMLProgressElement),
    progressText: byId("progress-text", HTMLElement),
    modeNote: byId("mode-note", HTMLElement),
    temperature: byId("temperature", HTMLInputElement),
    topP: byId("top-p", HTMLInputElement),
    maxTokens: byId("max-tokens", HTMLInputElement),
    reset: byId("reset", HTMLButtonElement),
    error: byId("error", HTMLElement),
    errorHeadline: byId("error-headline", HTMLElement),
    errorDetail: byId("error-detail", HTMLElement),
    errorClose: byId("error-close", HTMLButtonElement),
    messages: byId("messages", HTMLOListElement),
    stats: byId("stats", HTMLElement),
    composer: byId("composer", HTMLFormElement),
    prompt: byId("prompt", HTMLTextAreaElement),
    send: byId("send", HTMLButtonElement),
    stop: byId("stop", HTMLButtonElement),
    dropOverlay: byId("drop-overlay", HTMLElement),
  };
}

export type PageElements = ReturnType<typeof pageElements>;
