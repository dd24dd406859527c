"""The GraphQL documents the oracle tests ask the mirror (the graph's contract).

Each root field is its own document, so that one failing link costs only its own answer. The
last two ask for fields the contract names but the graph does not serve yet
(`Device.published`; pool status with KEP-5677's PoolStatus names): they fail validation today
and are compared all the same, as known defects (tests.oracle.known).
"""

DEVICES = """query($cluster: String!) { devices(cluster: $cluster, first: 1000) { nodes {
  driver pool name uuid nodeName shareable status taints
  remainingCapacity { name value }
  allocations { request shareID adminAccess claim { namespace name } } } } }"""

SLICES = """query($cluster: String!) { resourceSlices(cluster: $cluster) {
  name pool { name generation resourceSliceCount complete } } }"""

COUNTS = """query($cluster: String!) { cluster(name: $cluster) {
  counts { devices freeDevices claims pendingClaims } } }"""

CLAIMS = """query($cluster: String!) { resourceClaims(cluster: $cluster, first: 1000) { nodes {
  namespace name uid state idle consumers { name }
  allocation { devices { request shareID device { driver pool name } } } } } }"""

# The same claims, following each allocated device to the slice that publishes it.
CLAIM_SLICES = """query($cluster: String!) { resourceClaims(cluster: $cluster, first: 1000) {
  nodes { namespace name allocation { devices { device { driver pool name slice { name } } } } } } }"""

PODS = """query($cluster: String!) { pods(cluster: $cluster, first: 1000) { nodes {
  namespace name devices { driver pool name } } } }"""

WHO_HOLDS = """query($cluster: String!, $device: String!) {
  whoHolds(device: $device, cluster: $cluster) {
    request shareID claim { namespace name } device { driver pool name } } }"""

# --- what the contract names and the graph does not serve yet --------------------------------

PUBLISHED = """query($cluster: String!) {
  devices(cluster: $cluster, first: 1000) { nodes { driver pool name published } } }"""

# A held device no slice publishes, reached through its holding.
HELD_PUBLISHED = """query($cluster: String!, $device: String!) {
  whoHolds(device: $device, cluster: $cluster) { device { driver pool name published } } }"""

# KEP-5677 PoolStatus field names, per driver and pool of one cluster.
POOLS = """query($cluster: String!) { resourcePools(cluster: $cluster) {
  driver poolName generation resourceSliceCount nodeName
  totalDevices allocatedDevices availableDevices unavailableDevices validationError } }"""

# PodGroups (KEP-5729): their claims, pods and idle holding; the groups each claim names.
POD_GROUPS = """query($cluster: String!) { podGroups(cluster: $cluster) {
  namespace name claims { name resourceClaimName } pods { name } heldClaims { name } idleHeld } }"""

CLAIM_GROUPS = """query($cluster: String!) { resourceClaims(cluster: $cluster, first: 1000) {
  nodes { namespace name podGroups { name } } } }"""

# Alpha fields carried as written: derivedAttributes (KEP-6080), compatibilityGroups (KEP-5963).
CARRIED = """query($cluster: String!) {
  resourceClaims(cluster: $cluster, first: 1000) { nodes { namespace name requests {
    name derivedAttributes { name expression } firstAvailable { name derivedAttributes { name expression } } } } }
  devices(cluster: $cluster, first: 1000) { nodes { driver pool name consumesCounters } } }"""

WHOLE_CLUSTER = (
    DEVICES, SLICES, COUNTS, CLAIMS, CLAIM_SLICES, PODS, PUBLISHED, POOLS, POD_GROUPS,
    CLAIM_GROUPS, CARRIED,
)  # fmt: skip

# --- live events and history -----------------------------------------------------------------

CLAIM_EVENTS = """subscription($cluster: String!) { claimEvents(cluster: $cluster) {
  type namespace name new { state idle } } }"""

DEVICE_EVENTS = """subscription($cluster: String!) { deviceEvents(cluster: $cluster) {
  type new { status device { driver pool name } } old { device { driver pool name } } } }"""

DEVICE_HISTORY = """query($cluster: String!, $device: String!, $from: DateTime!, $to: DateTime!) {
  deviceHistory(device: $device, from: $from, to: $to, cluster: $cluster) {
    uuid allocations { driver pool device namespace claim claimUid request shareID since until } } }"""

WHO_HELD = """query($cluster: String!, $device: String!, $at: DateTime!) {
  whoHeld(device: $device, at: $at, cluster: $cluster) {
    driver pool device namespace claim request shareID } }"""

CLAIM_HISTORY = """query($cluster: String!, $namespace: String!, $name: String!) {
  claimHistory(cluster: $cluster, namespace: $namespace, name: $name) {
    uid allocations { driver pool device request shareID since until } } }"""
