import { Screen, html } from "../ui.js";
export function ClaimPage({ params }) { return html`<${Screen} name="claim" title="ClaimPage" ready=${true}>todo<//>`; }
