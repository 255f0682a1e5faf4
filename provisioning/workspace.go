package provisioning

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"strings"

	"remote/internal/hostfs"
	"remote/internal/lazyre"
	"remote/lxdexec"
	"remote/providers"
)

// skillNameRE is a plain skill name: no path separators, no leading dot.
var skillNameRE = lazyre.New(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)

// ValidSkillName reports whether name is a plain skill name.
func ValidSkillName(name string) bool {
	return skillNameRE.MatchString(name) && !strings.Contains(name, "..")
}

func hashOf(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

// PublishInstructions publishes the shared instructions to the provider's
// user-level instruction path (never into /workspace).
func (s *Steps) PublishInstructions(ctx context.Context, c Container, p providers.ProviderID) error {
	st, err := s.setup(p)
	if err != nil {
		return err
	}
	if s.opts.InstructionsDir == "" || st.InstructionsPath == "" {
		return nil
	}
	doc, err := s.instructions()
	if err != nil || len(doc) == 0 {
		return err
	}
	return s.publish(ctx, c, st.InstructionsPath, doc, 0o644)
}

// PublishSkills publishes every skill of the skills directory under
// /workspace/.agents/skills/<name>/ with a link where the provider looks
// for skills. A selected skill that is not a plain name, or that does not
// exist, is refused.
func (s *Steps) PublishSkills(ctx context.Context, c Container, p providers.ProviderID, selected []string) error {
	st, err := s.setup(p)
	if err != nil {
		return err
	}
	for _, name := range selected {
		if !ValidSkillName(name) {
			return fmt.Errorf("%w: %q is not a plain name", ErrBadSkill, name)
		}
	}
	available := map[string]bool{}
	if s.opts.SkillsDir != "" {
		root := operatorRoot(s.opts.SkillsDir)
		names, err := root.List("", true)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("read skills directory %q: %w", s.opts.SkillsDir, err)
		}
		for _, name := range names {
			if !ValidSkillName(name) {
				continue
			}
			if err := s.publishSkill(ctx, c, st, name, root, name); err != nil {
				return err
			}
			available[name] = true
		}
	}
	for _, name := range selected {
		if !available[name] && name != ScheduleSkill {
			return fmt.Errorf("%w: %q is not in the skills directory", ErrBadSkill, name)
		}
	}
	return nil
}

// PublishScheduleTools publishes the scheduled-tasks skill and its helper.
func (s *Steps) PublishScheduleTools(ctx context.Context, c Container, p providers.ProviderID) error {
	st, err := s.setup(p)
	if err != nil {
		return err
	}
	if s.opts.ScheduleDir != "" {
		return s.publishSkill(ctx, c, st, ScheduleSkill, operatorRoot(s.opts.ScheduleDir), "")
	}
	dir := containerJoin(SkillsRoot, ScheduleSkill)
	if err := s.publish(ctx, c, containerJoin(dir, "SKILL.md"), scheduleSkillDoc, 0o644); err != nil {
		return err
	}
	return s.link(ctx, c, st, ScheduleSkill)
}

// operatorRoot is an operator-configured tree (instructions, skills, the
// schedule skill): read beneath dir with no symlink on the way, regular
// files only, each owned by whoever owns dir, so a link or a hard link
// planted by someone else is not published.
func operatorRoot(dir string) hostfs.Root {
	return hostfs.Root{Dir: dir, Owner: hostfs.OwnerOfDir}
}

// instructions concatenates the *.md files of the instructions directory.
func (s *Steps) instructions() ([]byte, error) {
	root := operatorRoot(s.opts.InstructionsDir)
	names, err := root.List("", false)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list instructions in %q: %w", s.opts.InstructionsDir, err)
	}
	var out []byte
	for _, m := range names {
		if !strings.HasSuffix(m, ".md") || strings.HasPrefix(m, ".") {
			continue
		}
		b, err := root.ReadFile(m, maxAssetBytes)
		if err != nil {
			return nil, fmt.Errorf("read instructions: %w", err)
		}
		if len(out) > 0 {
			out = append(out, '\n')
		}
		out = append(out, b...)
	}
	return out, nil
}

// publishSkill pushes a skill folder (regular files only, modes kept) and
// links it for the provider. The whole tree is skipped when its hash
// matches what this container already has.
func (s *Steps) publishSkill(ctx context.Context, c Container, st ProviderSetup, name string, root hostfs.Root, rel string) error {
	files, err := root.ReadTree(rel, maxAssetBytes)
	if err != nil {
		return fmt.Errorf("read skill %q: %w", name, err)
	}
	tree := sha256.New()
	for _, f := range files {
		fmt.Fprintf(tree, "%s\x00%o\x00%s\n", f.Rel, f.Mode.Perm(), hashOf(f.Content))
	}
	key := "skill/" + name
	h := hex.EncodeToString(tree.Sum(nil))
	if !s.cached(c, key, h) {
		for _, f := range files {
			if err := s.publish(ctx, c, containerJoin(SkillsRoot, name, f.Rel), f.Content, f.Mode); err != nil {
				return err
			}
		}
		s.remember(c, key, h)
	}
	return s.link(ctx, c, st, name)
}

// link makes <SkillLinkDir>/<name> point at the published skill.
func (s *Steps) link(ctx context.Context, c Container, st ProviderSetup, name string) error {
	if st.SkillLinkDir == "" {
		return nil
	}
	target := containerJoin(SkillsRoot, name)
	linkPath := containerJoin(st.SkillLinkDir, name)
	if s.cached(c, linkPath, "link:"+target) {
		return nil
	}
	push := func() error {
		return s.opts.LXD.PushFile(ctx, c.Name, linkPath, strings.NewReader(target),
			lxdexec.FileOptions{Type: "symlink", UID: s.opts.UID, GID: s.opts.GID, MkdirParents: true})
	}
	err := push()
	if err != nil {
		// LXD does not push a symlink over an existing path. The link may
		// already be there: made before a restart (the cache is in memory)
		// or by a concurrent preparation. A link pointing elsewhere is
		// ours to replace; anything else at the path is the user's.
		switch cur, isLink := s.readLink(ctx, c.Name, linkPath); {
		case isLink && cur == target:
			err = nil
		case isLink:
			if err = s.opts.LXD.DeleteFile(ctx, c.Name, linkPath); err == nil || errors.Is(err, lxdexec.ErrNotFound) {
				if err = push(); err != nil {
					if cur, isLink := s.readLink(ctx, c.Name, linkPath); isLink && cur == target {
						err = nil
					}
				}
			}
		}
	}
	if err != nil {
		return fmt.Errorf("link skill %q at %q in %q: %w", name, linkPath, c.Name, classify(err))
	}
	s.remember(c, linkPath, "link:"+target)
	return nil
}

// readLink returns the target of the symlink at p, and false when p is
// missing, unreadable or not a symlink.
func (s *Steps) readLink(ctx context.Context, container, p string) (string, bool) {
	rc, info, err := s.opts.LXD.PullFile(ctx, container, p)
	if err != nil {
		return "", false
	}
	defer rc.Close()
	if info.Type != lxdexec.FileTypeSymlink {
		return "", false
	}
	b, err := io.ReadAll(io.LimitReader(rc, 4096))
	if err != nil {
		return "", false
	}
	return string(b), true
}
