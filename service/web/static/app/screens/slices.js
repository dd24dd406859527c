import { Screen, html } from "../ui.js";
export function ResourceSlices({ params }) { return html`<${Screen} name="slices" title="ResourceSlices" ready=${true}>todo<//>`; }
