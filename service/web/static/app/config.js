// Where this server's GraphQL endpoint and the screens live (written into the page by the
// server, so a mirror served under a path prefix works unchanged).
const element = document.getElementById("dra-mirror-config");
export const config = Object.freeze(JSON.parse(element ? element.textContent : "{}"));
