import { Screen, html } from "../ui.js";
export function Pods({ params }) { return html`<${Screen} name="pods" title="Pods" ready=${true}>todo<//>`; }
