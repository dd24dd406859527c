import { Screen, html } from "../ui.js";
export function ClaimTemplates({ params }) { return html`<${Screen} name="templates" title="ClaimTemplates" ready=${true}>todo<//>`; }
