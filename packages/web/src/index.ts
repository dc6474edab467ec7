import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { startWebServer, type WebServer, type WebServerOptions } from "./server/server.js";

export { ISOLATION_HEADERS } from "./server/headers.js";
export { parseRange, type ByteRange } from "./server/ranges.js";
export { SERVED_MODELS_PATH, type ServedModel, type ServedModelList } from "./app/served-models.js";
export type { WebServer, WebServerOptions };

/**
 * The built app: dist/app. Computed here because this module sits one folder below dist both
 * as compiled (dist/src/index.js) and bundled (dist/bundle/index.js).
 */
export const WEB_APP_DIR = join(dirname(fileURLToPath(import.meta.url)), "..", "app");

/** Serves the built chat app (WEB_APP_DIR unless `appDir` says) and the given model files. */
export function serveWebApp(options: Omit<WebServerOptions, "appDir"> & { appDir?: string } = {}): Promise<WebServer> {
  return startWebServer({ ...options, appDir: options.appDir ?? WEB_APP_DIR });
}
