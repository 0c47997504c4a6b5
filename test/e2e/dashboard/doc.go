// Package dashboard tests kubeplug's web dashboard as a person uses it: headless
// Chromium, driven by chromedp, against the local control plane, with the
// quickstart applied — readiness shown, an apply in another process appearing
// live, drift, a rollback with its confirmation, a user without rights refused,
// a screenshot of each page, and no sensitive value in anything the dashboard
// sends.
package dashboard
