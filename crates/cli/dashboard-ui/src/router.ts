// Paths of the page, as Argo's dashboard has them: /rollouts/NS and /rollout/NS/NAME.

type Route = (path: string) => void;

let onRoute: Route = () => {};

export function setRouter(route: Route): void {
  onRoute = route;
  window.addEventListener('popstate', () => onRoute(location.pathname));
}

export function navigate(path: string): void {
  history.pushState(null, '', path);
  onRoute(path);
}
