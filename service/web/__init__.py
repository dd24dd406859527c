"""The Devices screens in a browser, and GraphiQL, served from the package's own files.

A front end beside Slack and the CLI: the pages are static files (HTML shells, ES modules,
vendored libraries) that ask `/graphql` for every figure they show, from the browser, with the
page's own credentials. The Python side only serves those files (`service.web.routes`); it
reads no store. `docs/web.md` describes the screens and why the stack is what it is.
"""
