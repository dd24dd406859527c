import { Screen, html } from "../ui.js";
export function Contention({ params }) { return html`<${Screen} name="contention" title="Contention" ready=${true}>todo<//>`; }
