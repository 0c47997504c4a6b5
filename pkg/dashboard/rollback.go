package dashboard

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/kubeplug/kubeplug/pkg/action"
	"github.com/kubeplug/kubeplug/pkg/deploy"
)

type rollbackData struct {
	page
	Name     string
	Revision int
	// Target is the revision to restore, as recorded; nil when it cannot be read.
	Target *deploy.Revision
	// Done is the revision the rollback recorded; Refused says why it did not
	// happen.
	Done    *deploy.Record
	Refused []string
}

// rollbackConfirm asks before rolling back: it names the plugin, the
// revision and what restoring it means, and only its form posts the rollback.
func (s *Server) rollbackConfirm(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	d := rollbackData{page: s.page(r, "Roll back "+name, "cluster"), Name: name}
	rev, err := strconv.Atoi(r.URL.Query().Get("revision"))
	if err != nil || rev <= 0 {
		d.Problems = append(d.Problems, fmt.Sprintf("invalid revision %q: expected a revision number from the plugin's history", r.URL.Query().Get("revision")))
		s.render(w, http.StatusBadRequest, "rollback.html", d)
		return
	}
	d.Revision = rev
	h := action.NewHistory(s.opts.Config)
	h.Target = s.opts.Target
	revs, l := h.Run(r.Context(), name)
	d.Problems = problems(l)
	for i := range revs {
		if revs[i].Revision == rev {
			d.Target = &revs[i]
		}
	}
	if d.Target == nil && !l.HasFatal() {
		d.Problems = append(d.Problems, fmt.Sprintf("plugin %s has no revision %d", name, rev))
	}
	s.render(w, http.StatusOK, "rollback.html", d)
}

// rollback runs the rollback action with the dashboard's credentials, which
// are the user's: what they may not do, the API server refuses, and the page
// shows its answer.
func (s *Server) rollback(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	d := rollbackData{page: s.page(r, "Roll back "+name, "cluster"), Name: name}
	if err := s.checkForm(r); err != nil {
		d.Refused = []string{err.Error()}
		s.render(w, http.StatusForbidden, "rollback.html", d)
		return
	}
	rev, err := strconv.Atoi(r.PostFormValue("revision"))
	if err != nil || rev <= 0 || r.PostFormValue("confirm") != "yes" {
		d.Refused = []string{"a rollback needs a revision and the confirmation"}
		s.render(w, http.StatusBadRequest, "rollback.html", d)
		return
	}
	d.Revision = rev
	a := action.NewRollback(s.opts.Config)
	a.Target = s.opts.Target
	a.Revision = rev
	a.Timeout = s.opts.RollbackTimeout
	// A rollback half done is worse than one finished: closing the tab does
	// not cancel it; its own timeout (and the wait for readiness) bounds it.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), s.opts.RollbackTimeout+time.Minute)
	defer cancel()
	rec, l := a.Run(ctx, name)
	if l.HasFatal() {
		d.Refused = problems(l)
		status := http.StatusInternalServerError
		if strings.Contains(strings.ToLower(strings.Join(d.Refused, " ")), "forbidden") {
			status = http.StatusForbidden
		}
		s.render(w, status, "rollback.html", d)
		return
	}
	d.Done = rec
	s.hub.notify()
	s.render(w, http.StatusOK, "rollback.html", d)
}
