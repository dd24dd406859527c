import { Screen, html } from "../ui.js";
export function PodPage({ params }) { return html`<${Screen} name="pod" title="PodPage" ready=${true}>todo<//>`; }
