import { scale } from "../engine/scale.js";

export const layer = () => scale;
