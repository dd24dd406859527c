import { Screen, html } from "../ui.js";
export function ResourceClaims({ params }) { return html`<${Screen} name="claims" title="ResourceClaims" ready=${true}>todo<//>`; }
