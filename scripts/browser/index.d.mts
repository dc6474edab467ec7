// Types of the browser-test harness (index.mjs), for the TypeScript tests that import it.
import type { Browser, Page } from "puppeteer-core";

export declare const REPO_ROOT: string;
export declare const SHARED_MODELS: string;
export declare function hasSharedModels(): boolean;
export declare function findChromium(): string | undefined;
export declare function launchBrowser(options?: { args?: string[]; protocolTimeout?: number }): Promise<Browser>;
export declare function openPage(browser: Browser, url: string): Promise<{ page: Page; logs: string[] }>;

export interface ServedRequest {
  path: string;
  range: string | undefined;
  status: number;
}
export interface Server {
  /** http://127.0.0.1:PORT */
  origin: string;
  requests: ServedRequest[];
  close(): Promise<void>;
}
export declare function serve(options?: {
  root?: string;
  mounts?: Record<string, string>;
  isolated?: boolean;
  port?: number;
}): Promise<Server>;
