import { Screen, html } from "../ui.js";
export function DeviceClasses({ params }) { return html`<${Screen} name="classes" title="DeviceClasses" ready=${true}>todo<//>`; }
