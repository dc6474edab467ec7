/**
 * The list of local models a server offers the app (`infer web model.gguf` writes it; a static
 * host may leave it out, and the app then offers none). Shared by the server and the app.
 */
export const SERVED_MODELS_PATH = "models.json";

export interface ServedModel {
  /** The file's name, shown in the picker. */
  name: string;
  /** Where the app downloads it, relative to the page. */
  url: string;
  sizeBytes: number;
}

export interface ServedModelList {
  models: ServedModel[];
}
