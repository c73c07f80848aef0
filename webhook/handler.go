package webhook

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/rs/zerolog"

	"github.com/mergegate/mergegate/leasedo"
)

// MaxBody is GitHub's payload cap (25 MiB) and the handler's default limit.
const MaxBody int64 = 25 << 20

// Delivery headers GitHub sends.
const (
	EventHeader    = "X-GitHub-Event"
	DeliveryHeader = "X-GitHub-Delivery"
	// legacySignatureHeader is GitHub's SHA-1 signature, never accepted.
	legacySignatureHeader = "X-Hub-Signature"
)

// Inbox stores deliveries durably. Enqueue returns only after the delivery is
// committed; duplicate is true when a delivery with the same id is already
// stored (a redelivery), in which case nothing is written. d.Body is only
// valid during the call: the handler reuses its buffer.
type Inbox interface {
	Enqueue(ctx context.Context, d leasedo.Delivery) (duplicate bool, err error)
}

// HandlerConfig configures NewHandler.
type HandlerConfig struct {
	Secrets Secrets        // any one verifies; the zero value refuses everything (401)
	Inbox   Inbox          // required
	Clock   leasedo.Clock  // ReceivedAt; nil = wall clock
	Logger  zerolog.Logger // one line per delivery
	// OnStored, when set, is called after a new delivery is committed (not
	// for a duplicate), before the 202 is written: wake workers, record it.
	// It must not block for long: GitHub waits at most 10 s for an answer.
	// d.Body is only valid during the call (its buffer is reused).
	OnStored func(d leasedo.Delivery)
	// MaxBody caps the request body; 0 = MaxBody (25 MiB).
	MaxBody int64
	// Budget caps the bytes held by the bodies of all requests being read;
	// nil = one budget of DefaultBodyBudget shared by the whole process.
	Budget *Budget
	// BudgetWait is how long a request waits for room in Budget before it
	// is answered 503 with Retry-After; 0 = DefaultBudgetWait.
	BudgetWait time.Duration
	// after makes the BudgetWait timer (tests); nil = time.After.
	after func(time.Duration) <-chan time.Time
}

// NewHandler returns the POST /webhook handler (docs/queue.md). Checks run in this
// order: method (405), content type (415), size (413; 503 when the bodies
// in flight fill the budget), signature (401), headers, lengths and JSON
// (400), then the delivery is stored (202; 503 when the inbox fails). A
// ping is verified and answered 200 without being stored.
func NewHandler(cfg HandlerConfig) http.Handler {
	if cfg.Inbox == nil {
		panic("webhook.NewHandler: HandlerConfig.Inbox is nil")
	}
	if cfg.Clock == nil {
		cfg.Clock = leasedo.SystemClock{}
	}
	if cfg.MaxBody <= 0 {
		cfg.MaxBody = MaxBody
	}
	if cfg.Budget == nil {
		cfg.Budget = defaultBudget
	}
	if cfg.BudgetWait <= 0 {
		cfg.BudgetWait = DefaultBudgetWait
	}
	if cfg.after == nil {
		cfg.after = time.After
	}
	return &handler{cfg: cfg}
}

type handler struct {
	cfg HandlerConfig
}

// outcome is what one delivery produced: its status, answer and log fields.
type outcome struct {
	status     int
	err        string // short message for {"error": ...}; "" on success
	retryAfter int    // seconds, for a 503 the client may retry soon
	duplicate  bool
	ignored    bool  // an event mergegate does not subscribe to: 202, not stored
	cause      error // internal error, logged only (inbox failures)
	d          leasedo.Delivery
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body := body{budget: h.cfg.Budget}
	defer body.done()
	o := h.handle(w, r, &body)
	h.log(o)
	w.Header().Set("Content-Type", "application/json")
	if o.status == http.StatusMethodNotAllowed {
		w.Header().Set("Allow", http.MethodPost)
	}
	if o.retryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(o.retryAfter))
	}
	w.WriteHeader(o.status)
	var answer any
	switch {
	case o.err != "":
		answer = map[string]string{"error": o.err}
	case o.status == http.StatusOK:
		answer = map[string]string{"result": "pong"}
	case o.ignored:
		answer = map[string]string{"result": "ignored", "event": EventLabel(o.d.Event)}
	case o.duplicate:
		answer = map[string]string{"result": "duplicate", "delivery": o.d.ID}
	default:
		answer = map[string]string{"result": "stored", "delivery": o.d.ID}
	}
	_ = json.NewEncoder(w).Encode(answer)
}

// Steps of a body's buffer: the first is sized from Content-Length (at
// least minFirstStep, at most maxFirstStep, whatever was declared: a client
// that declares 25 MiB and sends one byte holds maxFirstStep), then the
// buffer doubles as bytes arrive, never past Content-Length+1 or the limit.
const (
	minFirstStep = 512
	maxFirstStep = 64 << 10
)

// body is what one request reserved from the budget: the capacity of the
// buffer its bytes are read into.
type body struct {
	budget   *Budget
	reserved int64
	timeout  <-chan time.Time // the request's wait for room, made when it first waits
}

// done gives the reservation back.
func (b *body) done() {
	b.budget.release(b.reserved)
	b.reserved = 0
}

// handle checks a request and stores the delivery; body holds the bytes
// read, which must not be kept after it returns. The checks run from the
// cheapest to the one that needs the whole body, and the signature before
// anything of the payload is read: method (405), content type (415), the
// body's size and room for it (413, 503), the signature (401), then the
// headers and the envelope (400). The answers are docs/queue.md's table.
func (h *handler) handle(w http.ResponseWriter, r *http.Request, body *body) outcome {
	o := outcome{d: leasedo.Delivery{
		ID:    r.Header.Get(DeliveryHeader),
		Event: r.Header.Get(EventHeader),
	}}
	fail := func(status int, msg string) outcome {
		o.status, o.err = status, msg
		return o
	}

	if r.Method != http.MethodPost {
		return fail(http.StatusMethodNotAllowed, "only POST is accepted")
	}
	form, ok := contentKind(r.Header.Get("Content-Type"))
	if !ok {
		return fail(http.StatusUnsupportedMediaType, "content type must be application/json or application/x-www-form-urlencoded")
	}
	raw, status, msg := h.readBody(w, r, body)
	if status != 0 {
		if status == http.StatusServiceUnavailable {
			o.retryAfter = budgetRetryAfter
		}
		return fail(status, msg)
	}
	if err := Verify(h.cfg.Secrets, raw, r.Header.Get(SignatureHeader)); err != nil {
		return fail(http.StatusUnauthorized, signatureMessage(err, r))
	}
	if o.d.Event == "" {
		return fail(http.StatusBadRequest, "missing "+EventHeader+" header")
	}
	if o.d.ID == "" {
		return fail(http.StatusBadRequest, "missing "+DeliveryHeader+" header")
	}
	if len(o.d.ID) > MaxDeliveryID {
		return fail(http.StatusBadRequest, fmt.Sprintf("%s is longer than %d bytes (GitHub sends a GUID)", DeliveryHeader, MaxDeliveryID))
	}
	for _, name := range [...]string{DeliveryHeader, EventHeader} {
		if v := r.Header.Get(name); !headerText(v) {
			return fail(http.StatusBadRequest, name+" is not printable UTF-8 text")
		}
	}
	if len(o.d.Event) > MaxEventName {
		return fail(http.StatusBadRequest, fmt.Sprintf("%s is longer than %d bytes (GitHub's event names are short)", EventHeader, MaxEventName))
	}
	if !Subscribed(o.d.Event) {
		// Signed by GitHub but not an event the App subscribes to (a
		// subscription ticked by hand, or a replay under another name):
		// answered, not stored.
		o.status, o.ignored = http.StatusAccepted, true
		return o
	}
	payload := raw
	if form {
		values, err := url.ParseQuery(string(raw))
		if err != nil || !values.Has("payload") {
			return fail(http.StatusBadRequest, "form-encoded delivery has no payload field")
		}
		payload = []byte(values.Get("payload"))
	}
	meta, err := parseEnvelope(payload)
	if err != nil {
		return fail(http.StatusBadRequest, err.Error())
	}
	o.d.Action, o.d.Tenant, o.d.Repo = meta.Action, meta.Tenant, meta.Repo
	if err := CheckRepoName(meta.Repo); err != nil {
		o.d.Repo = clip(o.d.Repo, MaxOwner+1+MaxRepoName)
		return fail(http.StatusBadRequest, err.Error())
	}
	if o.d.Event == "ping" {
		o.status = http.StatusOK
		return o
	}
	if meta.Tenant == "" {
		return fail(http.StatusBadRequest, "mergegate is a GitHub App: this delivery came from a repository webhook (no installation); install the App instead")
	}
	o.d.Body = payload
	o.d.ReceivedAt = h.cfg.Clock.Now()
	o.d.State = leasedo.DeliveryPending
	// A verified delivery is stored even if GitHub hangs up meanwhile: a
	// redelivery of it is then recognised as a duplicate.
	dup, err := h.cfg.Inbox.Enqueue(context.WithoutCancel(r.Context()), o.d)
	if err != nil {
		o.cause = err
		return fail(http.StatusServiceUnavailable, "delivery not stored; redeliver it later")
	}
	o.status, o.duplicate = http.StatusAccepted, dup
	if !dup && h.cfg.OnStored != nil {
		h.cfg.OnStored(o.d)
	}
	return o
}

// contentKind accepts application/json and application/x-www-form-urlencoded
// (parameters such as charset are ignored); form reports the latter.
func contentKind(header string) (form, ok bool) {
	mt, _, err := mime.ParseMediaType(header)
	if err != nil {
		return false, false
	}
	switch mt {
	case "application/json":
		return false, true
	case "application/x-www-form-urlencoded":
		return true, true
	}
	return false, false
}

// budgetRetryAfter is the Retry-After of a 503 for want of room in the
// budget, in seconds.
const budgetRetryAfter = 5

// readBody reads at most MaxBody bytes (http.MaxBytesReader reads one more
// to tell) in bounded steps: the buffer grows only as bytes arrive, and
// each step is reserved from the budget before it is allocated, so nothing
// is held for what Content-Length merely declares. A non-zero status is the
// answer when it could not.
func (h *handler) readBody(w http.ResponseWriter, r *http.Request, b *body) ([]byte, int, string) {
	tooLarge := "body is larger than GitHub's 25 MiB payload cap"
	if h.cfg.MaxBody != MaxBody {
		tooLarge = "body is larger than the configured limit"
	}
	if r.ContentLength > h.cfg.MaxBody {
		return nil, http.StatusRequestEntityTooLarge, tooLarge
	}
	src := http.MaxBytesReader(w, r.Body, h.cfg.MaxBody)
	var buf []byte
	for {
		if len(buf) == cap(buf) {
			next := nextCap(int64(cap(buf)), r.ContentLength, h.cfg.MaxBody)
			if next <= int64(cap(buf)) {
				return nil, http.StatusRequestEntityTooLarge, tooLarge
			}
			// Old and new buffer are both held while the bytes are copied.
			if !h.reserve(r, b, next) {
				return nil, http.StatusServiceUnavailable, busyMessage
			}
			grown := make([]byte, len(buf), next)
			copy(grown, buf)
			b.budget.release(int64(cap(buf)))
			b.reserved -= int64(cap(buf))
			buf = grown
		}
		n, err := src.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			return buf, 0, ""
		}
		if err != nil {
			if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
				return nil, http.StatusRequestEntityTooLarge, tooLarge
			}
			return nil, http.StatusBadRequest, "could not read the body"
		}
	}
}

const busyMessage = "too many request bodies are being received at once; retry later"

// reserve takes n bytes from the budget for b, waiting at most BudgetWait
// in all for the request.
func (h *handler) reserve(r *http.Request, b *body, n int64) bool {
	if b.timeout == nil {
		// Made before the first wait only: most requests never wait.
		if b.budget.reserve(r.Context(), n, nil) {
			b.reserved += n
			return true
		}
		b.timeout = h.cfg.after(h.cfg.BudgetWait)
	}
	if !b.budget.reserve(r.Context(), n, b.timeout) {
		return false
	}
	b.reserved += n
	return true
}

// nextCap is a body buffer's next capacity after cur (see minFirstStep).
func nextCap(cur, declared, limit int64) int64 {
	var next int64
	switch {
	case cur == 0 && declared >= 0:
		next = min(max(declared+1, minFirstStep), maxFirstStep)
	case cur == 0:
		next = maxFirstStep
	case declared >= 0 && declared+1 > cur:
		next = min(2*cur, declared+1)
	default:
		next = 2 * cur
	}
	return min(next, limit+1)
}

// Lengths GitHub never exceeds: a delivery id is a GUID, an owner (user or
// organisation) at most 39 characters, a repository name at most 100.
// Longer ones are refused before anything is stored.
const (
	MaxDeliveryID = 100 // bytes
	MaxOwner      = 39  // characters
	MaxRepoName   = 100 // characters
)

// MaxEventName bounds X-GitHub-Event: GitHub's longest event name
// (security_and_analysis, repository_vulnerability_alert, ...) is under 40
// bytes.
const MaxEventName = 64

// Events are the X-GitHub-Event values mergegate acts on: the events
// app.yml subscribes to, the installation events every App receives, and
// ping. A test holds this list to app.yml.
var Events = []string{"pull_request", "pull_request_review", "check_suite", "check_run", "status", "push",
	"issue_comment", "merge_group", "installation", "installation_repositories", "ping"}

// Subscribed reports whether event is one of Events.
func Subscribed(event string) bool { return slices.Contains(Events, event) }

// EventLabel is event as a metric label or a log value: one of Events, or
// "other". No label of mergegate's metrics takes a request's text.
func EventLabel(event string) string {
	if Subscribed(event) {
		return event
	}
	return "other"
}

// headerText: v is valid UTF-8 with no control characters (GitHub's
// headers are ASCII; Go's server lets any byte above 0x7f through).
func headerText(v string) bool {
	if !utf8.ValidString(v) {
		return false
	}
	for _, r := range v {
		if r < 0x20 || r == 0x7f {
			return false
		}
	}
	return true
}

// logText is a header's value fit for a log line: valid UTF-8, at most n
// bytes.
func logText(s string, n int) string {
	return clip(strings.ToValidUTF8(s, "\ufffd"), n)
}

// CheckRepoName refuses a repository full name (owner/name) longer than
// GitHub allows; "" (an installation-level event) passes.
func CheckRepoName(full string) error {
	if full == "" {
		return nil
	}
	owner, name, _ := strings.Cut(full, "/")
	if n := utf8.RuneCountInString(owner); n > MaxOwner {
		return fmt.Errorf("repository owner is %d characters long; GitHub allows at most %d", n, MaxOwner)
	}
	if n := utf8.RuneCountInString(name); n > MaxRepoName {
		return fmt.Errorf("repository name is %d characters long; GitHub allows at most %d", n, MaxRepoName)
	}
	return nil
}

// clip cuts s to at most n bytes, for log lines about refused input.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "") + "..."
}

// signatureMessage explains a 401 without echoing the signature.
func signatureMessage(err error, r *http.Request) string {
	switch {
	case errors.Is(err, ErrMissingSignature) && r.Header.Get(legacySignatureHeader) != "":
		return "only " + SignatureHeader + " (SHA-256) is accepted; X-Hub-Signature (SHA-1) is not"
	case errors.Is(err, ErrNoSecrets):
		return "no webhook secret is configured"
	case errors.Is(err, ErrMissingSignature):
		return "missing " + SignatureHeader + " header"
	case errors.Is(err, ErrMalformedSignature):
		return SignatureHeader + " is malformed"
	}
	return "signature does not match"
}

// log writes the one line per delivery. Never the secret, signature or body.
func (h *handler) log(o outcome) {
	var ev *zerolog.Event
	switch {
	case o.status >= 500:
		ev = h.cfg.Logger.Error()
	case o.status >= 400:
		ev = h.cfg.Logger.Warn()
	case o.status == http.StatusAccepted && !o.ignored:
		// Stored: the engine's "delivery applied" line, at info, says
		// what became of it; at info a delivery is one line.
		ev = h.cfg.Logger.Debug()
	default:
		ev = h.cfg.Logger.Info()
	}
	// A key whose value is unknown (a ping has no action, a refused
	// request perhaps not even a delivery id) is left out rather than
	// logged empty.
	for _, kv := range [...][2]string{{"delivery", logText(o.d.ID, MaxDeliveryID)}, {"event", logText(o.d.Event, MaxEventName)},
		{"action", o.d.Action}, {"tenant", o.d.Tenant}, {"repo", o.d.Repo}} {
		if kv[1] != "" {
			ev = ev.Str(kv[0], kv[1])
		}
	}
	ev = ev.Int("status", o.status)
	if o.duplicate {
		ev = ev.Bool("duplicate", true)
	}
	if o.ignored {
		ev = ev.Bool("ignored", true)
	}
	if o.err != "" {
		ev = ev.Str("error", o.err)
	}
	if o.cause != nil {
		ev = ev.AnErr("cause", o.cause)
	}
	ev.Msg("webhook delivery")
}
