// Browser notifications: asked for on a user's click, shown only while
// the tab is hidden (an approval waiting, a run finished or failed), once
// per tag. A click on one brings the tab back to that chat.
const shown = new Set();

export function notificationState() {
  if (!('Notification' in window)) return 'unsupported';
  return window.Notification.permission;
}

// askPermission must run inside a user gesture (a click handler).
export async function askPermission() {
  if (!('Notification' in window)) return 'unsupported';
  try {
    return await window.Notification.requestPermission();
  } catch {
    return window.Notification.permission;
  }
}

// notify shows a notification when the tab is hidden and permission is
// granted; tag makes it once-only. It reports whether one was shown.
export function notify(title, body, tag, hash) {
  if (notificationState() !== 'granted' || document.visibilityState !== 'hidden') return false;
  if (tag) {
    if (shown.has(tag)) return false;
    shown.add(tag);
  }
  try {
    const n = new window.Notification(title, { body, tag: tag || undefined });
    if (n && hash) {
      n.onclick = () => {
        window.focus();
        location.hash = hash;
        if (n.close) n.close();
      };
    }
    return true;
  } catch {
    return false;
  }
}
