package codexharness

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
)

// The test binary re-executes itself as a fake `codex app-server` when
// fakeEnv names a scenario (the rawexec pattern).
const fakeEnv = "CODEXHARNESS_FAKE_APPSERVER"

func TestMain(m *testing.M) {
	if sc := os.Getenv(fakeEnv); sc != "" {
		os.Exit(fakeAppServer(sc))
	}
	os.Exit(m.Run())
}

type fakePeer struct {
	in  *bufio.Scanner
	out *bufio.Writer
}

func (p *fakePeer) send(format string, args ...any) {
	fmt.Fprintf(p.out, format+"\n", args...)
	p.out.Flush()
}

// next reads the next client message.
func (p *fakePeer) next() (map[string]json.RawMessage, bool) {
	for p.in.Scan() {
		var m map[string]json.RawMessage
		if json.Unmarshal(p.in.Bytes(), &m) == nil {
			return m, true
		}
	}
	return nil, false
}

func str(r json.RawMessage) string {
	var s string
	_ = json.Unmarshal(r, &s)
	return s
}

// handshake answers initialize, initialized and the thread request, and
// returns the turn/start message's id after answering it.
func (p *fakePeer) handshake(threadResult string) bool {
	for {
		m, ok := p.next()
		if !ok {
			return false
		}
		switch str(m["method"]) {
		case "initialize":
			p.send(`{"id":%s,"result":{"userAgent":"fake","platformOs":"linux"}}`, m["id"])
			p.send(`{"method":"configWarning","params":{"summary":"no bubblewrap"}}`)
		case "initialized":
		case "thread/start", "thread/resume", "thread/fork":
			if threadResult == "" {
				threadResult = `{"thread":{"id":"thr-1"},"model":"gpt-fake"}`
			}
			if strings.HasPrefix(threadResult, "ERR:") {
				p.send(`{"id":%s,"error":{"code":-32600,"message":%q}}`, m["id"], strings.TrimPrefix(threadResult, "ERR:"))
				continue
			}
			p.send(`{"id":%s,"result":%s}`, m["id"], threadResult)
			p.send(`{"method":"thread/started","params":{"thread":{"id":"thr-1"}}}`)
		case "turn/start":
			p.send(`{"id":%s,"result":{"turn":{"id":"turn-1","status":"inProgress","items":[]}}}`, m["id"])
			return true
		}
	}
}

const tid = `"threadId":"thr-1","turnId":"turn-1"`

func fakeAppServer(scenario string) int {
	p := &fakePeer{in: bufio.NewScanner(os.Stdin), out: bufio.NewWriter(os.Stdout)}
	p.in.Buffer(make([]byte, 1<<16), 1<<24)
	switch scenario {
	case "resume-missing":
		p.handshake("ERR:no rollout found for thread id thr-gone")
		return 0
	case "fork-other-error":
		fmt.Fprintln(os.Stderr, "fatal: state db locked")
		p.handshake("ERR:invalid session id: zz")
		return 0
	case "no-model":
		p.handshake(`{"thread":{"id":"thr-1"}}`)
		return 0
	case "resume-not-found":
		p.handshake("ERR:thread thr-gone not found")
		return 0
	case "late-turn-id":
		return lateTurnID(p)
	}
	if !p.handshake("") {
		return 1
	}
	switch scenario {
	case "full":
		p.send(`{"method":"turn/started","params":{"threadId":"thr-1","turn":{"id":"turn-1","status":"inProgress"}}}`)
		p.send(`{"method":"item/reasoning/summaryPartAdded","params":{%s,"itemId":"rs-1","summaryIndex":0}}`, tid)
		p.send(`{"method":"item/reasoning/summaryTextDelta","params":{%s,"itemId":"rs-1","delta":"think","summaryIndex":0}}`, tid)
		p.send(`{"method":"item/completed","params":{%s,"item":{"id":"rs-1","type":"reasoning","summary":["thinking"],"content":["raw"]}}}`, tid)
		p.send(`not json at all`)
		p.send(`{"method":""}`)
		p.send(`{"id":[1],"result":{}}`)
		p.send(`{"method":"item/agentMessage/delta","params":{%s,"itemId":"m-1","delta":"Hel"}}`, tid)
		p.send(`{"method":"item/agentMessage/delta","params":{%s,"itemId":"m-1","delta":"lo"}}`, tid)
		p.send(`{"method":"item/agentMessage/delta","params":{"threadId":"child-1","turnId":"ct-1","itemId":"cm-1","delta":"child text"}}`)
		p.send(`{"method":"item/completed","params":{"threadId":"child-1","turnId":"ct-1","item":{"id":"cm-1","type":"agentMessage","text":"child text"}}}`)
		p.send(`{"method":"turn/completed","params":{"threadId":"child-1","turn":{"id":"ct-1","status":"completed"}}}`)
		p.send(`{"method":"item/completed","params":{%s,"item":{"id":"m-1","type":"agentMessage","text":"Hello world"}}}`, tid)
		p.send(`{"method":"item/started","params":{%s,"item":{"id":"c-1","type":"commandExecution","status":"inProgress","command":"ls","cwd":"/w"}}}`, tid)
		p.send(`{"method":"item/commandExecution/outputDelta","params":{%s,"itemId":"c-1","delta":"a\n"}}`, tid)
		p.send(`{"method":"item/completed","params":{%s,"item":{"id":"c-1","type":"commandExecution","status":"completed","command":"ls","cwd":"/w","aggregatedOutput":"a\n","exitCode":0}}}`, tid)
		p.send(`{"method":"item/completed","params":{%s,"item":{"id":"c-2","type":"commandExecution","status":"failed","command":"false","cwd":"/w","aggregatedOutput":"","exitCode":1}}}`, tid)
		p.send(`{"method":"item/started","params":{%s,"item":{"id":"x-1","type":"hologram","status":"inProgress"}}}`, tid)
		p.send(`{"method":"item/started","params":{%s,"item":{"id":"co-1","type":"collabAgentToolCall","tool":"spawnAgent","status":"inProgress"}}}`, tid)
		p.send(`{"method":"fancy/newThing","params":{"threadId":"thr-1","x":1}}`)
		p.send(`{"method":"error","params":{"error":{"message":"reconnecting"},"willRetry":true}}`)
		p.send(`{"method":"thread/tokenUsage/updated","params":{%s,"tokenUsage":{"total":{"inputTokens":20},"last":{"totalTokens":15,"inputTokens":10,"cachedInputTokens":3,"outputTokens":5,"reasoningOutputTokens":2},"modelContextWindow":1000}}}`, tid)
		p.send(`{"method":"turn/completed","params":{"threadId":"thr-1","turn":{"id":"turn-1","status":"completed","items":[]}}}`)
	case "approvals":
		p.send(`{"method":"item/commandExecution/requestApproval","id":"req-42","params":{%s,"itemId":"c-1","command":"rm -rf x"}}`, tid)
		p.send(`{"method":"item/commandExecution/requestApproval","id":7,"params":{%s,"itemId":"c-2","command":"touch y"}}`, tid)
		p.send(`{"method":"brand/newRequest","id":8,"params":{"threadId":"thr-1","question":"?"}}`)
		for answered := 0; answered < 3; {
			m, ok := p.next()
			if !ok {
				return 1
			}
			if _, isResp := m["method"]; isResp {
				continue
			}
			b, _ := json.Marshal(m)
			p.send(`{"method":"test/answer","params":{"threadId":"thr-1","line":%q}}`, b)
			answered++
		}
		p.send(`{"method":"item/tool/requestUserInput","id":9,"params":{%s,"itemId":"q-1"}}`, tid)
		p.send(`{"method":"serverRequest/resolved","params":{"threadId":"thr-1","requestId":9}}`)
		p.send(`{"method":"turn/completed","params":{"threadId":"thr-1","turn":{"id":"turn-1","status":"completed"}}}`)
	case "interrupt":
		p.send(`{"method":"item/agentMessage/delta","params":{%s,"itemId":"m-1","delta":"partial"}}`, tid)
		for {
			m, ok := p.next()
			if !ok {
				return 1
			}
			if str(m["method"]) == "turn/interrupt" {
				p.send(`{"id":%s,"result":{}}`, m["id"])
				p.send(`{"method":"turn/completed","params":{"threadId":"thr-1","turn":{"id":"turn-1","status":"interrupted"}}}`)
				break
			}
		}
	case "abandoned":
		p.send(`{"method":"item/fileChange/requestApproval","id":"a-1","params":{%s,"itemId":"f-1"}}`, tid)
		p.send(`{"method":"turn/completed","params":{"threadId":"thr-1","turn":{"id":"turn-1","status":"completed"}}}`)
	case "linger": // finishes the turn, then never exits, not even when stdin closes
		p.send(`{"method":"item/agentMessage/delta","params":{%s,"itemId":"m-1","delta":"done"}}`, tid)
		p.send(`{"method":"turn/completed","params":{"threadId":"thr-1","turn":{"id":"turn-1","status":"completed"}}}`)
		time.Sleep(time.Hour) //nolint:forbidigo // the fake CLI lingers: the subject
	case "eof-marker": // finishes the turn, then records that stdin was closed
		p.send(`{"method":"turn/completed","params":{"threadId":"thr-1","turn":{"id":"turn-1","status":"completed"}}}`)
		for {
			if _, ok := p.next(); !ok {
				_ = os.WriteFile(os.Getenv("EOF_MARKER"), []byte("stdin closed"), 0o600)
				return 0
			}
		}
	case "hang":
		p.send(`{"method":"item/agentMessage/delta","params":{%s,"itemId":"m-1","delta":"partial"}}`, tid)
		time.Sleep(time.Hour) //nolint:forbidigo // the fake CLI hangs: the subject
	case "failed":
		p.send(`{"method":"error","params":{"error":{"message":"unexpected status 401 Unauthorized"},"willRetry":false}}`)
		p.send(`{"method":"turn/completed","params":{"threadId":"thr-1","turn":{"id":"turn-1","status":"failed","error":{"message":"unexpected status 401 Unauthorized"}}}}`)
	case "exit-early":
		fmt.Fprintln(os.Stderr, "panic: boom")
		return 3
	case "long-line":
		p.send(`{"method":"x","params":{"pad":"%s"}}`, strings.Repeat("a", MaxLineBytes+10))
		time.Sleep(time.Hour) //nolint:forbidigo // the fake CLI hangs after the long line: the subject
	case "big":
		big := strings.Repeat("b", 2<<20)
		p.send(`{"method":"item/agentMessage/delta","params":{%s,"itemId":"m-1","delta":%q}}`, tid, big)
		p.send(`{"method":"item/completed","params":{%s,"item":{"id":"m-1","type":"agentMessage","text":%q}}}`, tid, big+"!")
		p.send(`{"method":"turn/completed","params":{"threadId":"thr-1","turn":{"id":"turn-1","status":"completed"}}}`)
	}
	// Wait for stdin to close, like the real server.
	for {
		if _, ok := p.next(); !ok {
			return 0
		}
	}
}
