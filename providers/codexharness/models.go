package codexharness

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"

	"remote/providers"
)

// Model is one entry of the app-server's model/list (the fields Remote
// uses).
type Model struct {
	ID                        string `json:"id"`
	Model                     string `json:"model"`
	DisplayName               string `json:"displayName"`
	Hidden                    bool   `json:"hidden"`
	IsDefault                 bool   `json:"isDefault"`
	Upgrade                   string `json:"upgrade"`
	DefaultReasoningEffort    string `json:"defaultReasoningEffort"`
	SupportedReasoningEfforts []struct {
		ReasoningEffort string `json:"reasoningEffort"`
	} `json:"supportedReasoningEfforts"`
}

// ListModels starts `codex app-server` (cmd) through launcher, asks it
// for model/list and returns the models, stopping the server afterwards.
// ctx bounds the whole exchange.
func ListModels(ctx context.Context, launcher providers.Launcher, cmd providers.Command) ([]Model, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	proc, err := launcher.Start(ctx, cmd)
	if err != nil {
		return nil, fmt.Errorf("start app-server for model/list: %w", err)
	}
	go func() { _, _ = io.Copy(io.Discard, proc.Stderr()) }()
	stdin := proc.Stdin()
	requests := `{"id":1,"method":"initialize","params":{"clientInfo":{"name":"remoted","version":"1"}}}` + "\n" +
		`{"method":"initialized"}` + "\n" +
		`{"id":2,"method":"model/list","params":{"includeHidden":false}}` + "\n"
	if _, err := io.WriteString(stdin, requests); err != nil {
		return nil, fmt.Errorf("app-server model/list: write: %w", err)
	}
	defer func() {
		_ = stdin.Close()
		cancel()
		_ = proc.Wait()
	}()
	sc := bufio.NewScanner(proc.Stdout())
	sc.Buffer(make([]byte, 64<<10), MaxLineBytes)
	for sc.Scan() {
		m, err := DecodeMessage(sc.Bytes())
		if err != nil || m.Kind != KindResponse || m.ID != "2" {
			continue
		}
		if m.Error != nil {
			return nil, fmt.Errorf("app-server model/list: %w", m.Error)
		}
		var res struct {
			Data []Model `json:"data"`
		}
		if err := json.Unmarshal(m.Result, &res); err != nil {
			return nil, fmt.Errorf("app-server model/list: %w", err)
		}
		return res.Data, nil
	}
	if ctx.Err() != nil {
		return nil, fmt.Errorf("app-server model/list: %w", ctx.Err())
	}
	return nil, fmt.Errorf("app-server model/list: output ended without an answer (%v)", sc.Err())
}

// effortOrder ranks the reasoning efforts Codex knows, lowest first.
var effortOrder = []string{"none", "minimal", "low", "medium", "high", "xhigh", "max", "ultra"}

// Catalog turns a model list into Capabilities fields: the visible model
// ids in the CLI's order, the default one, and every effort some model
// supports (ordered low to high; unknown ones last).
func Catalog(models []Model) (ids []string, def string, efforts []string) {
	seen := map[string]bool{}
	for _, m := range models {
		if m.Hidden || m.ID == "" {
			continue
		}
		ids = append(ids, m.ID)
		if m.IsDefault && def == "" {
			def = m.ID
		}
		for _, e := range m.SupportedReasoningEfforts {
			if e.ReasoningEffort != "" {
				seen[e.ReasoningEffort] = true
			}
		}
	}
	for _, e := range effortOrder {
		if seen[e] {
			efforts = append(efforts, e)
			delete(seen, e)
		}
	}
	var rest []string
	for e := range seen {
		rest = append(rest, e)
	}
	if len(rest) > 0 {
		slices.Sort(rest)
		efforts = append(efforts, rest...)
	}
	return ids, def, efforts
}
