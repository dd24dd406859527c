import { Screen, html } from "../ui.js";
export function DevicePage({ params }) { return html`<${Screen} name="device" title="DevicePage" ready=${true}>todo<//>`; }
