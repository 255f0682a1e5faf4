package daemon

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"

	"remote/api"
	"remote/daemon/prompt"
	"remote/daemon/runhub"
	"remote/daemon/store"
	"remote/daemon/webhook"
	"remote/daemon/workspace"
)

// LXDStatus reports LXD reachability for GET /v1/info.
type LXDStatus interface {
	Status(ctx context.Context) api.LXDInfo
}

// ProjectChats lets chats be bound to projects (prompt.ProjectChats).
type ProjectChats = prompt.ProjectChats

// Options configures a Server. Store and Registry are required.
type Options struct {
	Store    Store
	Registry *Registry
	Logger   hclog.Logger
	Metrics  *Metrics // nil: a new registry
	Version  string
	// Access lists the peers (besides root and the daemon's uid) that may
	// use the socket.
	Access Access
	// TranscriptBytes, SkillsDir and Roots configure the prompt service.
	TranscriptBytes int
	SkillsDir       string
	Roots           Roots
	// IdleTimeout stops a run silent for that long (0 = never).
	IdleTimeout time.Duration
	// DefaultCwd is a loose chat's cwd when the request names none (the
	// host user's home).
	DefaultCwd string
	// StateDir, MinFree, MaxRunBytes, MaxChatBytes and StorageCheckEvery
	// bound storage (ServiceOptions); zero values turn them off.
	StateDir                           string
	MinFree, MaxRunBytes, MaxChatBytes int64
	StorageCheckEvery                  time.Duration
	LXD                                LXDStatus    // may be nil: info reports LXD as not configured
	Projects                           ProjectChats // may be nil: project chats refused
	// RouteProviders add routes to the table (the projects seam).
	RouteProviders  []RouteProvider
	SubscriberQueue int // 0: runhub.DefaultSubscriberQueue
	// PingEvery and PongWait time the chat socket's keepalive: a ping every
	// PingEvery, and a peer that answers none for PongWait is dropped.
	// 0: 25 s and 60 s (docs/api.md).
	PingEvery, PongWait time.Duration
	// Notify, when its URL is set, POSTs run notifications to a webhook.
	Notify webhook.NotifierOptions
	// Queue bounds the bytes of queued prompts; zero values turn them off.
	Queue QueueBounds
	// Hub and Service are the run hub and the prompt service, built
	// before the server (NewRunHub, NewPromptService) so that the route
	// packages are handed them at construction; nil: New builds them from
	// these options.
	Hub     *runhub.Hub
	Service *Service
	// ContainerForker is the project side of a fork with a container
	// (nil: forks with a container are refused).
	ContainerForker ContainerForker
}

// NewRunHub builds the run hub of o: over o.Store, counted in o.Metrics
// (which must be the server's), with o.SubscriberQueue.
func NewRunHub(o Options) *runhub.Hub {
	return runhub.NewHub(o.Store, cmp.Or[hclog.Logger](o.Logger, hclog.NewNullLogger()).Named("hub"), o.Metrics, o.SubscriberQueue)
}

// NewPromptService builds the prompt service of o on hub.
func NewPromptService(o Options, hub *runhub.Hub) *Service {
	log := cmp.Or[hclog.Logger](o.Logger, hclog.NewNullLogger())
	return prompt.NewService(prompt.ServiceOptions{Store: o.Store, Hub: hub, Registry: o.Registry, Logger: log.Named("prompt"),
		Metrics: o.Metrics, TranscriptBytes: o.TranscriptBytes, SkillsDir: o.SkillsDir, Roots: o.Roots,
		IdleTimeout: o.IdleTimeout,
		StateDir:    o.StateDir, MinFree: o.MinFree, MaxRunBytes: o.MaxRunBytes, MaxChatBytes: o.MaxChatBytes,
		StorageCheckEvery: o.StorageCheckEvery, Projects: o.Projects, Queue: o.Queue})
}

// Server is remoted's API: the route table behind the peer-credential
// gate, the prompt service and the run hub.
type Server struct {
	store          Store
	reg            *Registry
	log            hclog.Logger
	auditLog       hclog.Logger
	metrics        *Metrics
	version        string
	access         atomic.Pointer[Access]
	defaultCwd     string
	lxd            LXDStatus
	projects       ProjectChats
	hub            *runhub.Hub
	containerForks atomic.Pointer[ContainerForker] // Options.ContainerForker: fork with a container
	svc            *Service
	handler        http.Handler
	started        time.Time
	pingEvery      time.Duration
	pongWait       time.Duration
	notifier       *webhook.Notifier // nil without a webhook
	workspace      *workspace.Hub
	table          []Route // the validated route table (RouteTable)
	// projectStore lists projects for the workspace snapshot; nil when the
	// store keeps none.
	projectStore interface {
		Projects() ([]api.Project, error)
	}
	stopWorkspace context.CancelFunc

	mu          sync.Mutex
	httpSrv     *http.Server
	shutDown    bool // Shutdown has begun: a later Serve returns at once
	stopStreams chan struct{}
	stopOnce    sync.Once
}

// New builds the server and validates its route table.
func New(o Options) (*Server, error) {
	if o.Store == nil || o.Registry == nil {
		return nil, errors.New("daemon: Options.Store and Options.Registry are required")
	}
	if o.Logger == nil {
		o.Logger = hclog.NewNullLogger()
	}
	if o.Metrics == nil {
		o.Metrics = NewMetrics()
	}
	s := &Server{store: o.Store, reg: o.Registry, log: o.Logger, auditLog: o.Logger.Named("audit"), metrics: o.Metrics, version: o.Version,
		defaultCwd: o.DefaultCwd, lxd: o.LXD, projects: o.Projects,
		started: time.Now(), stopStreams: make(chan struct{}),
		pingEvery: cmp.Or(o.PingEvery, wsPingEvery), pongWait: cmp.Or(o.PongWait, wsPongWait)}
	s.access.Store(&o.Access)
	if o.Hub == nil {
		o.Hub = NewRunHub(o)
	}
	s.hub = o.Hub
	if o.ContainerForker != nil {
		s.containerForks.Store(&o.ContainerForker)
	}
	s.workspace = workspace.New(o.Logger.Named("workspace"), o.Store.Chat, s.hub.Running)
	s.hub.Observe(s.workspace.Observe)
	if cs, ok := o.Store.(interface{ OnChange(func(store.Change)) }); ok {
		cs.OnChange(s.workspace.OnStoreChange)
	}
	if ps, ok := o.Store.(interface {
		Projects() ([]api.Project, error)
	}); ok {
		s.projectStore = ps
	}
	var wsCtx context.Context
	wsCtx, s.stopWorkspace = context.WithCancel(context.Background())
	go s.workspace.Run(wsCtx)
	if o.Notify.URL != "" {
		if o.Notify.Logger == nil {
			o.Notify.Logger = o.Logger.Named("notify")
		}
		s.notifier = webhook.NewNotifier(o.Notify, o.Store.Chat)
		s.hub.Observe(s.notifier.Observe)
	}
	if o.Service == nil {
		o.Service = NewPromptService(o, s.hub)
	}
	s.svc = o.Service
	routes := s.routes()
	for _, rp := range o.RouteProviders {
		routes = append(routes, rp.Routes()...)
	}
	mux, err := s.buildMux(routes)
	if err != nil {
		return nil, err
	}
	s.handler, s.table = s.gate(mux), routes
	return s, nil
}

// SetAccess replaces the allowed peers; it applies to new connections
// (config reload).
func (s *Server) SetAccess(a Access) { s.access.Store(&a) }

// Metrics are the server's Prometheus series.
func (s *Server) Metrics() *Metrics { return s.metrics }

// Handler is the gated route table (every request needs a Peer in its
// context, which Serve's ConnContext provides).
func (s *Server) Handler() http.Handler { return s.handler }

// Serve answers requests on ln until Shutdown; every request's context
// derives from ctx (the daemon's context). It returns nil after Shutdown.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	srv := &http.Server{
		Handler:           s.handler,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		BaseContext:       func(net.Listener) context.Context { return ctx },
		ConnContext:       s.connContext,
		ErrorLog:          s.log.StandardLogger(&hclog.StandardLoggerOptions{InferLevels: true}),
	}
	s.mu.Lock()
	if s.httpSrv != nil {
		s.mu.Unlock()
		return errors.New("daemon: Serve called twice")
	}
	if s.shutDown {
		// Shutdown ran before Serve registered its server: there is
		// nothing to shut down later, so serving now would never end.
		s.mu.Unlock()
		ln.Close()
		return nil
	}
	s.httpSrv = srv
	s.mu.Unlock()
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serve %s: %w", ln.Addr(), err)
	}
	return nil
}

// Shutdown stops accepting connections, cancels every run and waits for
// their terminal events to be persisted, ends follow streams and chat
// sockets, and waits (until ctx ends) for requests to finish. The caller
// closes the store afterwards.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	srv := s.httpSrv
	s.shutDown = true
	s.mu.Unlock()
	errc := make(chan error, 1)
	if srv != nil {
		go func() { errc <- srv.Shutdown(ctx) }()
	} else {
		errc <- nil
	}
	runErr := s.svc.Shutdown(ctx)
	s.stopOnce.Do(func() { close(s.stopStreams) })
	if s.notifier != nil {
		s.notifier.Close()
	}
	s.stopWorkspace()
	return errors.Join(runErr, <-errc)
}

// streamsStopped reports whether Shutdown has ended the follow streams.
func (s *Server) streamsStopped() bool {
	select {
	case <-s.stopStreams:
		return true
	default:
		return false
	}
}

// streamContext ends when ctx ends or the server shuts its streams down.
func (s *Server) streamContext(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(ctx)
	go func() {
		select {
		case <-s.stopStreams:
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, cancel
}
