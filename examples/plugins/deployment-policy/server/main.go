// Command deployment-policy serves two admission webhooks for Deployments
// with sdk/webhook: a validating one that refuses a container image naming no
// version (no tag, or latest), naming the field, and a mutating one that gives
// containers without resource requests the default requests. The
// deployment-policy plugin runs it.
package main

import (
	"context"
	"errors"
	"flag"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/kubeplug/kubeplug/sdk/webhook"
)

func main() {
	addr := flag.String("addr", ":8443", "address to serve HTTPS on")
	certDir := flag.String("cert-dir", "/serving", "directory of tls.crt and tls.key (the mounted serving Secret)")
	flag.Parse()
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	srv, err := webhook.New(webhook.Options{
		CertFile: filepath.Join(*certDir, "tls.crt"), KeyFile: filepath.Join(*certDir, "tls.key"),
		Addr: *addr, Logger: log,
		Hooks: map[string]webhook.Hook{
			"/validate": webhook.Validate(versionedImages),
			"/mutate":   webhook.Mutate(defaultRequests),
		},
	})
	if err == nil {
		log.Info("serving", "addr", *addr)
		err = srv.Run(ctx)
	}
	if err != nil && !errors.Is(err, context.Canceled) {
		log.Error("deployment-policy", "error", err)
		os.Exit(1)
	}
}

// versionedImages refuses a Deployment whose containers' images name no
// version: rolling back or forward is only possible to a version.
func versionedImages(_ context.Context, req webhook.Request[appsv1.Deployment]) error {
	spec := field.NewPath("spec", "template", "spec")
	var errs field.ErrorList
	pod := req.Object.Spec.Template.Spec
	for _, l := range []struct {
		name string
		cs   []corev1.Container
	}{{"initContainers", pod.InitContainers}, {"containers", pod.Containers}} {
		for i, c := range l.cs {
			if tag, ok := imageTag(c.Image); !ok || tag == "latest" {
				errs = append(errs, field.Invalid(spec.Child(l.name).Index(i).Child("image"), c.Image, "must name a version: a tag other than latest, or a digest"))
			}
		}
	}
	return errs.ToAggregate()
}

// imageTag returns an image reference's tag; ok is false when it has neither
// a tag nor a digest.
func imageTag(image string) (tag string, ok bool) {
	if strings.Contains(image, "@") {
		return "", true
	}
	last := image[strings.LastIndex(image, "/")+1:] // a registry's port is before the last /
	if i := strings.LastIndex(last, ":"); i >= 0 {
		return last[i+1:], true
	}
	return "", false
}

// Requests given to a container that asks for none.
var (
	defaultCPU    = resource.MustParse("100m")
	defaultMemory = resource.MustParse("64Mi")
)

// defaultRequests gives every container without resource requests the
// default ones, so the scheduler counts it.
func defaultRequests(_ context.Context, req webhook.Request[appsv1.Deployment]) error {
	cs := req.Object.Spec.Template.Spec.Containers
	for i := range cs {
		if len(cs[i].Resources.Requests) == 0 {
			cs[i].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: defaultCPU, corev1.ResourceMemory: defaultMemory}
		}
	}
	return nil
}
