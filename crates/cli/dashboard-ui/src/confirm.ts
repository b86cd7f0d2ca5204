// Every change asks first: a dialog naming what will happen, with Cancel focused.

import { h } from './dom';

export function confirmAction(title: string, detail: string, confirmLabel: string): Promise<boolean> {
  return new Promise((resolve) => {
    const close = (answer: boolean) => {
      overlay.remove();
      document.removeEventListener('keydown', onKey);
      resolve(answer);
    };
    const onKey = (event: KeyboardEvent) => {
      if (event.key === 'Escape') close(false);
    };
    const cancel = h('button', { type: 'button', 'data-testid': 'cancel', onclick: () => close(false) }, 'Cancel');
    const overlay = h(
      'div',
      { class: 'overlay' },
      h(
        'div',
        { class: 'dialog', role: 'dialog', 'aria-modal': 'true', 'aria-label': title, 'data-testid': 'confirm-dialog' },
        h('h2', {}, title),
        h('p', {}, detail),
        h(
          'div',
          { class: 'buttons' },
          cancel,
          h('button', { type: 'button', class: 'danger', 'data-testid': 'confirm', onclick: () => close(true) }, confirmLabel),
        ),
      ),
    );
    document.addEventListener('keydown', onKey);
    document.body.appendChild(overlay);
    cancel.focus();
  });
}
